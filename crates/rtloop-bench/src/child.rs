//! The child processes the benchmarks start, played in the child: the command line's
//! `rtloop child NAME JSON` hands NAME and JSON to [`run`].

use rtloop_launch::ChildRole;

use crate::BenchError;

/// Play `json` as `R` with `play`, if `name` is `R`'s.
fn play<R: ChildRole>(
    name: &str,
    json: &str,
    play: impl FnOnce(&R) -> Result<(), BenchError>,
) -> Option<Result<(), BenchError>> {
    (name == R::NAME).then(|| play(&rtloop_launch::role_from(json)?))
}

/// Play the benchmark role `name` (its JSON `json`) in this process; None if `name` is not
/// one of the benchmarks' roles.
pub fn run(name: &str, json: &str) -> Option<Result<(), BenchError>> {
    use rtloop_peers::{run as peers, spsc};
    #[cfg(feature = "iceoryx2")]
    {
        use crate::iceoryx2_peer as ix2;
        let r = play(name, json, ix2::pub_role)
            .or_else(|| play(name, json, ix2::sub_role))
            .or_else(|| play(name, json, ix2::echo_role));
        if r.is_some() {
            return r;
        }
    }
    play(name, json, crate::verify::gen_role)
        .or_else(|| play(name, json, crate::verify::recv_role))
        .or_else(|| play(name, json, crate::stream::stream_echo_role))
        .or_else(|| play(name, json, crate::fieldtrip::server_role))
        .or_else(|| {
            play(name, json, |r: &spsc::ProducerRole| {
                Ok(spsc::run_producer(r)?)
            })
        })
        .or_else(|| {
            play(name, json, |r: &spsc::ConsumerRole| {
                Ok(spsc::run_consumer(r)?)
            })
        })
        .or_else(|| play::<peers::WriterRole>(name, json, crate::peers::writer_role))
        .or_else(|| play::<peers::ReaderRole>(name, json, crate::peers::reader_role))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_benchmark_role_is_found_by_name_and_others_are_left_alone() {
        assert!(run("demo-reader", "{}").is_none());
        // the verify receiver, with a JSON that is not one: found, refused as JSON
        let e = run(crate::verify::RecvRole::NAME, "{\"stream\": 3}")
            .expect("a benchmark role")
            .unwrap_err();
        assert!(matches!(e, BenchError::Launch(_)), "{e}");
    }
}
