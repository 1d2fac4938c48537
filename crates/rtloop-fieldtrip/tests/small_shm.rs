//! A PUT_HDR that does not fit (a container's small /dev/shm) is refused and leaves the
//! previous header and data served as they were; the refusal names the shared-memory file
//! system's free space, not the machine's memory. (Its own test binary: it points the
//! process's streams at a 4 MiB tmpfs.)

use std::sync::Arc;

use rtloop_fieldtrip::{Buffer, BufferConfig, Client, ClientError, Server, ServerConfig};
use rtloop_testkit::{unique_name, SmallShm, Watchdog};

#[test]
fn a_put_hdr_that_does_not_fit_keeps_the_old_header_and_data() {
    let _w = Watchdog::arm(60, "small shm put_hdr");
    let Some(_shm) = SmallShm::mount(4) else {
        return;
    };
    let name = unique_name("ft-small");
    let mut bcfg = BufferConfig::new(&name);
    bcfg.capacity = 1 << 18;
    bcfg.max_bytes = 1 << 40;
    bcfg.events = 16;
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
    // 1 channel of float32 x 2^18 samples = 1 MiB: fits
    c.put_header(1, 100.0, 9, &[]).unwrap();
    c.put_data(1, &[1.0f32, 2.0, 3.0]).unwrap();
    // 64 channels of float32 x 2^18 = 64 MiB: does not
    let e = c.put_header(64, 100.0, 9, &[]).unwrap_err();
    assert!(matches!(e, ClientError::Refused { .. }), "{e:?}");
    // the old header and data are still served
    let h = c.get_header().unwrap();
    assert_eq!((h.def.nchans, h.def.nsamples), (1, 3));
    assert_eq!(c.get_data::<f32>(0, 2).unwrap(), [1.0, 2.0, 3.0]);
    c.put_data(1, &[4.0f32]).unwrap();
    assert_eq!(c.get_header().unwrap().def.nsamples, 4);
    drop(c);
    server.shutdown();
}
