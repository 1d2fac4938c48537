//! Restarts over real sockets: a PUT_HDR that replaces a large ring releases the old one
//! without holding up other clients.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtloop_fieldtrip::buffer::drops_under_state_lock;
use rtloop_fieldtrip::{Buffer, BufferConfig, Client, ClientError, Server, ServerConfig};
use rtloop_testkit::{unique_name, StreamGuard, Watchdog};

fn serve(name: &str, capacity: u64) -> Server {
    let mut bcfg = BufferConfig::new(name);
    bcfg.capacity = capacity;
    bcfg.max_bytes = 1 << 30;
    bcfg.events = 16;
    bcfg.remove_on_drop = true;
    Server::start(
        Arc::new(Buffer::new(bcfg)),
        ServerConfig {
            tcp: Some("127.0.0.1:0".into()),
            unix: None,
            ..ServerConfig::default()
        },
    )
    .unwrap()
}

#[test]
fn a_put_hdr_releases_the_old_large_ring_without_the_lock() {
    // unmapping a 256 MiB ring takes tens of ms; done under the state lock, every other
    // client's request waited for it (256 -> 4 channels: 109-153 ms)
    let _w = Watchdog::arm(180, "old ring released off the lock");
    let name = unique_name("ft-release");
    let _guard = StreamGuard::new(&name);
    let server = serve(&name, 1 << 20);
    let addr = server.tcp_addr().unwrap().to_string();
    let mut writer = Client::connect(&addr).unwrap();
    writer.put_header(64, 1000.0, 9, &[]).unwrap(); // 64 x float32 x 2^20: 256 MiB
    writer.put_data(64, &vec![1.0f32; 64 * 4]).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let (ready, ready_rx) = std::sync::mpsc::channel();
    let poller = {
        let (addr, done) = (addr.clone(), done.clone());
        std::thread::spawn(move || {
            let mut c = Client::connect(&addr).unwrap();
            let mut worst = Duration::ZERO;
            let mut ready = Some(ready);
            while !done.load(Ordering::Acquire) {
                let t = Instant::now();
                let h = c.get_header().unwrap();
                if h.def.nsamples > 0 {
                    // refused when the header was replaced in between, else answered
                    match c.get_data::<f32>(0, 0) {
                        Ok(v) => assert!(!v.is_empty()),
                        Err(ClientError::Refused { .. }) => {}
                        Err(e) => panic!("GET_DAT: {e}"),
                    }
                }
                worst = worst.max(t.elapsed());
                if let Some(r) = ready.take() {
                    r.send(()).unwrap();
                }
            }
            worst
        })
    };
    ready_rx.recv().unwrap();
    let before = drops_under_state_lock();
    for round in 0..3 {
        writer.put_header(4, 1000.0, 9, &[]).unwrap(); // the 256 MiB ring goes
        writer.put_data(4, &[2.0f32; 8]).unwrap();
        if round < 2 {
            writer.put_header(64, 1000.0, 9, &[]).unwrap();
            writer.put_data(64, &vec![3.0f32; 64 * 2]).unwrap();
        }
    }
    done.store(true, Ordering::Release);
    let worst = poller.join().unwrap();
    println!("longest GET_HDR + GET_DAT of another client across 3 replacements of a 256 MiB ring: {worst:?}");
    assert_eq!(
        drops_under_state_lock() - before,
        0,
        "an old stream was released (unmapped) while the state lock was held"
    );
    let h = writer.get_header().unwrap();
    assert_eq!((h.def.nchans, h.def.nsamples), (4, 2));
    drop(writer);
    server.shutdown();
}
