//! Clients poll GET_HDR until a header comes, by design: the server says once that there is
//! none, not on every poll. (Its own test binary: it installs the process's log subscriber.)

use std::io::Write;
use std::sync::{Arc, Mutex};

use rtloop_fieldtrip::{Buffer, BufferConfig, Client, ClientError, Server, ServerConfig};
use rtloop_testkit::{unique_name, StreamGuard, Watchdog};

/// Where the log lines go: a buffer the test reads.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Write for Log {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Log {
    fn count(&self, what: &str) -> usize {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .matches(what)
            .count()
    }
}

fn refused<T>(r: Result<T, ClientError>) -> bool {
    matches!(r, Err(ClientError::Refused { .. }))
}

#[test]
fn polling_get_hdr_before_the_first_header_warns_once() {
    let _w = Watchdog::arm(60, "no-header warning once");
    let log = Log::default();
    let sink = log.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .init();
    let name = unique_name("ft-poll");
    let _guard = StreamGuard::new(&name);
    let mut bcfg = BufferConfig::new(&name);
    bcfg.capacity = 1000;
    bcfg.remove_on_drop = true;
    let server = Server::start(
        Arc::new(Buffer::new(bcfg)),
        ServerConfig {
            tcp: Some("127.0.0.1:0".into()),
            unix: None,
            ..ServerConfig::default()
        },
    )
    .unwrap();
    let addr = server.tcp_addr().unwrap().to_string();
    let mut poller = Client::connect(&addr).unwrap();
    for _ in 0..20 {
        assert!(refused(poller.get_header()));
    }
    // another client polling too: still once
    assert!(refused(Client::connect(&addr).unwrap().get_header()));
    assert_eq!(log.count("no header yet"), 1);
    // a header comes and goes: the next poll without one is said once more
    poller.put_header(1, 10.0, 9, &[]).unwrap();
    poller.flush_header().unwrap();
    for _ in 0..5 {
        assert!(refused(poller.get_header()));
    }
    assert_eq!(log.count("no header yet"), 2);
    // other refusals are each logged
    poller.put_header(1, 10.0, 9, &[]).unwrap();
    for _ in 0..3 {
        assert!(refused(poller.get_data::<f32>(0, 0)));
    }
    assert_eq!(log.count("GET_DAT refused"), 3);
    drop(poller);
    server.shutdown();
}
