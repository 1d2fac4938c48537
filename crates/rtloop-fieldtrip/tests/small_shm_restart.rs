//! An acquisition program that restarts sends the same header again. On a 64 MiB
//! shared-memory mount (Docker's default) the new ring does not fit beside the old one; it
//! must fit in the old one's place, as it does in the reference, while no local process
//! reads the old stream. (Its own test binary: it points the process's streams at a 64 MiB
//! tmpfs.)

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::sync::Arc;

use rtloop_fieldtrip::{Buffer, BufferConfig, Client, ClientError, Server, ServerConfig};
use rtloop_stream::Stream;
use rtloop_testkit::{finish, role, role_command, unique_name, SmallShm, Watchdog, REPORT_PREFIX};

const TEST: &str = "the_same_header_again_fits_in_the_old_rings_place";

#[test]
fn the_same_header_again_fits_in_the_old_rings_place() {
    if role().as_deref() == Some("reader") {
        // a local reader of the served stream, in its own process, until stdin closes
        let name = std::env::var("FT_STREAM").unwrap();
        let s = Stream::open(&name).unwrap();
        println!("{REPORT_PREFIX} ready={}", s.written() == 1);
        std::io::stdout().flush().unwrap();
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        return;
    }
    let _w = Watchdog::arm(120, "small shm restart");
    let Some(_shm) = SmallShm::mount(64) else {
        return;
    };
    let name = unique_name("ft-restart");
    // the reference's sizes: 600000 samples, 1024 events
    let mut bcfg = BufferConfig::new(&name);
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
    let mut c = Client::connect(&server.tcp_addr().unwrap().to_string()).unwrap();
    // 16 channels of float32 x 600000 samples: 38 MiB; two do not fit in 64 MiB
    let mut waiter = None;
    for round in 0..3 {
        if round == 2 {
            // a client waiting for data across the restart (FieldTrip's clients sit in
            // WAIT_DAT): it goes on waiting against the new header, and does not keep the
            // old stream's memory taken meanwhile
            let mut w = Client::connect(&server.tcp_addr().unwrap().to_string()).unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            waiter = Some(std::thread::spawn(move || {
                tx.send(()).unwrap();
                w.wait(2, 1000, 60_000).unwrap()
            }));
            rx.recv().unwrap();
            // give it time to be in its wait (without, the wait begins on the new header)
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        c.put_header(16, 1000.0, 9, &[])
            .unwrap_or_else(|e| panic!("PUT_HDR {round}: {e}"));
        c.put_data(16, &[round as f32; 16 * 2]).unwrap();
        let h = c.get_header().unwrap();
        assert_eq!((h.def.nchans, h.def.nsamples), (16, 2));
        assert_eq!(c.get_data::<f32>(0, 1).unwrap(), vec![round as f32; 32]);
    }
    c.put_data(16, &[9.0f32; 16]).unwrap();
    assert_eq!(waiter.unwrap().join().unwrap(), (3, 0));
    // a smaller header fits too
    c.put_header(8, 1000.0, 9, &[]).unwrap();
    c.put_data(8, &[7.0f32; 8]).unwrap();
    // one that would not fit even in the old one's place is refused; the old stays
    let e = c.put_header(32, 1000.0, 9, &[]).unwrap_err();
    assert!(matches!(e, ClientError::Refused { .. }), "{e:?}");
    assert_eq!(c.get_header().unwrap().def.nchans, 8);
    assert_eq!(c.get_data::<f32>(0, 0).unwrap(), vec![7.0f32; 8]);

    // while a local process reads the stream, its memory stays taken: refused, and the
    // reader and the FieldTrip clients go on with the old stream
    c.put_header(16, 1000.0, 9, &[]).unwrap();
    c.put_data(16, &[5.0f32; 16]).unwrap();
    let mut child = role_command(TEST, "reader", &[("FT_STREAM", &name)])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains(REPORT_PREFIX) {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the reader ended");
    }
    assert!(line.contains("ready=true"), "{line:?}");
    let e = c.put_header(16, 1000.0, 9, &[]).unwrap_err();
    assert!(matches!(e, ClientError::Refused { .. }), "{e:?}");
    let h = c.get_header().unwrap();
    assert_eq!((h.def.nchans, h.def.nsamples), (16, 1));
    assert_eq!(c.get_data::<f32>(0, 0).unwrap(), vec![5.0f32; 16]);
    // once it has closed, the same header fits again
    drop(child.stdin.take());
    child.stdout = Some(out.into_inner());
    finish(child, "the reader");
    c.put_header(16, 1000.0, 9, &[]).unwrap();
    assert_eq!(c.get_header().unwrap().def.nsamples, 0);
    drop(c);
    server.shutdown();
}
