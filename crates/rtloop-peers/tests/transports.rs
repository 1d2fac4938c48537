//! Every transport this machine has, end to end: a real writer and real readers (threads of
//! this process, each with its own socket, inlet, subscriber or stream reader) run the
//! benchmark's phases; every sample must arrive once, in order and intact, and every paced
//! chunk must be timed. stream, unix and iceoryx2 are always here; lsl and zmq-* run where
//! pylsl and pyzmq are installed (the Python tests run them through `rtloop bench peers`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use rtloop_peers::run::{read_phases, write_phases, ReaderReport, WriterReport};
use rtloop_peers::transport::{open_receiver, open_sender};
use rtloop_peers::{Transport, Trial, Wait};

fn trial(transport: Transport, chunk: usize, readers: usize, wait: Wait) -> Trial {
    static N: AtomicU32 = AtomicU32::new(0);
    Trial {
        transport,
        channels: 64,
        rate: 30_000.0,
        chunk,
        readers,
        wait,
        latency_seconds: 0.1,
        throughput_seconds: 0.1,
        tag: format!(
            "test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ),
        stream_spin_us: 0,
    }
}

fn run(t: &Trial) -> (WriterReport, Vec<ReaderReport>) {
    let mut tx = open_sender(t).unwrap_or_else(|e| panic!("{}: {e}", t.transport));
    let endpoint = tx.endpoint();
    let (ready, connected) = mpsc::channel();
    let readers: Vec<_> = (0..t.readers)
        .map(|_| {
            let (t, endpoint, ready) = (t.clone(), endpoint.clone(), ready.clone());
            std::thread::spawn(move || {
                let mut rx =
                    open_receiver(&t, &endpoint).unwrap_or_else(|e| panic!("{}: {e}", t.transport));
                ready.send(()).unwrap();
                read_phases(&t, &mut *rx).unwrap()
            })
        })
        .collect();
    for _ in 0..t.readers {
        connected.recv_timeout(Duration::from_secs(30)).unwrap();
    }
    tx.prepare(t.readers, Duration::from_secs(20)).unwrap();
    let w = write_phases(t, &mut *tx).unwrap();
    let rs = readers.into_iter().map(|h| h.join().unwrap()).collect();
    (w, rs)
}

#[test]
fn every_sample_arrives_once_in_order_and_intact_on_every_transport() {
    let mut ran = Vec::new();
    for transport in Transport::ALL {
        if let Err(e) = transport.check_available() {
            assert!(
                !matches!(
                    transport,
                    Transport::Stream | Transport::Unix | Transport::Iceoryx2
                ),
                "{transport} must always be available: {e}"
            );
            eprintln!("not here: {e}");
            continue;
        }
        for (chunk, readers, wait) in [(1, 1, Wait::Spin), (16, 2, Wait::Block)] {
            let t = trial(transport, chunk, readers, wait);
            let (w, rs) = run(&t);
            assert!(
                w.latency_chunks > 0 && w.throughput_samples > 0,
                "{transport}: {w:?}"
            );
            for r in &rs {
                let what = format!("{transport}, chunk {chunk}, {wait}: {r:?}");
                assert!(r.ended, "{what}");
                assert_eq!((r.lost, r.errors), (0, 0), "{what}");
                assert_eq!(r.throughput_samples, w.throughput_samples, "{what}");
                assert_eq!(r.histogram().len(), w.latency_chunks, "{what}");
                assert!(r.throughput_last_ns > w.throughput_start_ns, "{what}");
            }
        }
        ran.push(transport);
    }
    assert!(ran.len() >= 3, "ran {ran:?}");
}
