//! iceoryx2 publish/subscribe (zero-copy shared memory, crates.io) with an event service to
//! wake readers: the writer loans a slice, copies the chunk in, sends it (`Block` when a
//! reader's buffer is full, so nothing is lost) and notifies; a reader takes every waiting
//! sample and otherwise sleeps on its
//! listener. This is iceoryx2's documented way to wait without spinning. Readers read the
//! sample where it is (zero-copy), as iceoryx2 is meant to be used.

use std::time::{Duration, Instant};

use iceoryx2::port::listener::Listener;
use iceoryx2::port::notifier::Notifier;
use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::port::unable_to_deliver_strategy::UnableToDeliverStrategy;
use iceoryx2::port::update_connections::UpdateConnections;
use iceoryx2::prelude::*;
use iceoryx2::sample::Sample;
use iceoryx2::service::port_factory::{event, publish_subscribe};

use super::{history_bytes, Receiver, Sender, TransportError, WrongSize};
use crate::{PeerError, Transport, Trial, Wait};

/// iceoryx2's error from the call `action`.
fn err<E: std::error::Error + Send + Sync + 'static>(
    action: &'static str,
) -> impl FnOnce(E) -> TransportError {
    TransportError::library(Transport::Iceoryx2.name(), action)
}

type Pubsub = publish_subscribe::PortFactory<ipc::Service, [u8], ()>;

/// The node, the data service and the wake-up event of one trial.
struct Services {
    data: Pubsub,
    wake: event::PortFactory<ipc::Service>,
    _node: Node<ipc::Service>,
}

/// How rtloop sets up iceoryx2 (the one place it does): a publish/subscribe service of
/// byte slices and an event service to wake readers. The peers benchmark's trials and the
/// stream benchmark's peer column both open their ports through it.
#[derive(Debug, Clone)]
pub struct Ix2Config {
    /// The data service's name; the event service is `NAME-wake`.
    pub service: String,
    /// Bytes of every message: the writer's slice length, and what a reader accepts.
    pub message_bytes: usize,
    /// Messages each reader's buffer holds before the writer blocks.
    pub buffer: usize,
    /// Reader processes.
    pub readers: usize,
    /// How readers wait: blocking readers sleep on the event service, which the writer
    /// then notifies on every send; spinning readers poll `receive` and need no notification.
    pub wait: Wait,
}

impl Ix2Config {
    /// A trial's services (`rtloop-peers-TAG` unless `service` is given): as many messages
    /// per reader as the stream's history holds.
    #[must_use]
    pub fn of_trial(t: &Trial, service: Option<&str>) -> Ix2Config {
        Ix2Config {
            service: service.map_or_else(|| format!("rtloop-peers-{}", t.tag), str::to_string),
            message_bytes: t.chunk_bytes(),
            buffer: history_bytes(t) / t.chunk_bytes(),
            readers: t.readers,
            wait: t.wait,
        }
    }
}

fn services(c: &Ix2Config) -> Result<Services, PeerError> {
    // its default-config notice is noise here; errors still show
    set_log_level(LogLevel::Error);
    let node = NodeBuilder::new()
        .create::<ipc::Service>()
        .map_err(err("create the node"))?;
    let data_name: ServiceName = c
        .service
        .as_str()
        .try_into()
        .map_err(err("name the service"))?;
    let wake_name: ServiceName = format!("{}-wake", c.service)
        .as_str()
        .try_into()
        .map_err(err("name the service"))?;
    let data = node
        .service_builder(&data_name)
        .publish_subscribe::<[u8]>()
        .max_publishers(1)
        .max_subscribers(c.readers)
        .history_size(0)
        .subscriber_max_buffer_size(c.buffer)
        .enable_safe_overflow(false)
        .open_or_create()
        .map_err(err("open the data service"))?;
    let wake = node
        .service_builder(&wake_name)
        .event()
        .max_notifiers(1)
        .max_listeners(c.readers)
        .open_or_create()
        .map_err(err("open the event service"))?;
    Ok(Services {
        data,
        wake,
        _node: node,
    })
}

/// The writer: a publisher and a notifier on services `rtloop-peers-TAG`.
pub struct Ix2Sender {
    publisher: Publisher<ipc::Service, [u8], ()>,
    /// Wakes blocked readers; polling readers need no notification.
    notifier: Option<Notifier<ipc::Service>>,
    svc: Services,
    name: String,
}

impl Ix2Sender {
    /// Create a trial's services and the writer's ports.
    pub fn open(t: &Trial) -> Result<Ix2Sender, PeerError> {
        Ix2Sender::with(&Ix2Config::of_trial(t, None))
    }

    /// Create the services `c` names and the writer's ports.
    pub fn with(c: &Ix2Config) -> Result<Ix2Sender, PeerError> {
        let svc = services(c)?;
        let publisher = svc
            .data
            .publisher_builder()
            .initial_max_slice_len(c.message_bytes)
            .unable_to_deliver_strategy(UnableToDeliverStrategy::Block)
            .create()
            .map_err(err("create the publisher"))?;
        let notifier = match c.wait {
            Wait::Block => Some(
                svc.wake
                    .notifier_builder()
                    .create()
                    .map_err(err("create the notifier"))?,
            ),
            Wait::Spin => None,
        };
        Ok(Ix2Sender {
            publisher,
            notifier,
            svc,
            name: c.service.clone(),
        })
    }
}

impl Sender for Ix2Sender {
    fn endpoint(&self) -> String {
        self.name.clone()
    }

    fn prepare(&mut self, readers: usize, timeout: Duration) -> Result<(), TransportError> {
        let deadline = Instant::now() + timeout;
        loop {
            let subs = self.svc.data.dynamic_config().number_of_subscribers();
            let listeners = self.svc.wake.dynamic_config().number_of_listeners();
            if subs >= readers && listeners >= readers {
                break;
            }
            if Instant::now() >= deadline {
                return Err(TransportError::NotConnected {
                    transport: Transport::Iceoryx2.name(),
                    connected: subs.min(listeners),
                    wanted: readers,
                    timeout,
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.publisher
            .update_connections()
            .map_err(err("update the connections"))
    }

    fn send(&mut self, chunk: &[u8]) -> Result<(), TransportError> {
        let s = self
            .publisher
            .loan_slice_uninit(chunk.len())
            .map_err(err("loan"))?;
        s.write_from_slice(chunk).send().map_err(err("send"))?;
        if let Some(n) = &self.notifier {
            n.notify().map_err(err("notify"))?;
        }
        Ok(())
    }
}

/// A reader: a subscriber and a listener.
pub struct Ix2Receiver {
    sub: Subscriber<ipc::Service, [u8], ()>,
    listener: Listener<ipc::Service>,
    /// The sample handed out last, returned to the publisher by the next `recv`.
    held: Option<Sample<ipc::Service, [u8], ()>>,
    _svc: Services,
    chunk_bytes: usize,
}

impl Ix2Receiver {
    /// Open a trial's services at the writer's `endpoint` and the reader's ports.
    pub fn open(t: &Trial, endpoint: &str) -> Result<Ix2Receiver, PeerError> {
        Ix2Receiver::with(&Ix2Config::of_trial(t, Some(endpoint)))
    }

    /// Open the services `c` names and the reader's ports.
    pub fn with(c: &Ix2Config) -> Result<Ix2Receiver, PeerError> {
        let svc = services(c)?;
        let sub = svc
            .data
            .subscriber_builder()
            .create()
            .map_err(err("create the subscriber"))?;
        let listener = svc
            .wake
            .listener_builder()
            .create()
            .map_err(err("create the listener"))?;
        Ok(Ix2Receiver {
            sub,
            listener,
            held: None,
            _svc: svc,
            chunk_bytes: c.message_bytes,
        })
    }
}

impl Receiver for Ix2Receiver {
    fn recv(&mut self, timeout: Duration) -> Result<&[u8], TransportError> {
        self.held = None;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.sub.receive().map_err(err("receive"))? {
                if s.payload().len() != self.chunk_bytes {
                    return Err(WrongSize::error(
                        Transport::Iceoryx2,
                        s.payload().len(),
                        self.chunk_bytes,
                    ));
                }
                return Ok(self.held.insert(s).payload());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(&[]);
            }
            // pending notifications are kept, so one sent since `receive` is not missed
            self.listener
                .timed_wait_all(|_| {}, left)
                .map_err(err("wait"))?;
        }
    }
}
