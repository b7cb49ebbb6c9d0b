//! The library handle works from any async runtime, or none: the simulator runs on its own
//! threads and runtime.

use crate::util::{Result, raw_async, raw_blocking};
use sim_ollama::SimBuilder;

const BODY: &str = r#"{"model":"tiny","prompt":"Hello","stream":false,"options":{"num_predict":4}}"#;

#[test]
fn from_plain_threads_without_any_runtime() {
    let sim = SimBuilder::new().instances(2).start().unwrap();
    for addr in sim.addrs() {
        let r = raw_blocking(*addr, "POST", "/api/generate", Some(BODY), &[]);
        assert_eq!((r.status, r.json()["eval_count"].as_u64()), (200, Some(4)));
    }
}

#[tokio::test(flavor = "current_thread")]
async fn from_a_current_thread_tokio_test_and_dropped_inside_it() -> Result {
    let sim = SimBuilder::new().start()?;
    let v: serde_json::Value =
        reqwest::Client::new().post(format!("{}/api/generate", sim.url())).body(BODY).send().await?.json().await?;
    assert_eq!(v["eval_count"], 4);
    drop(sim); // must not panic inside the caller's runtime
    Ok(())
}

#[test]
fn from_smol() {
    let sim = SimBuilder::new().start().unwrap();
    let addr = sim.addrs()[0];
    let r = smol::block_on(async {
        let s = smol::net::TcpStream::connect(addr).await.expect("connects");
        raw_async(s, addr, "POST", "/api/generate", Some(BODY)).await
    });
    assert_eq!((r.status, r.json()["eval_count"].as_u64()), (200, Some(4)));
}

#[test]
fn from_async_std() {
    let sim = SimBuilder::new().start().unwrap();
    let addr = sim.addrs()[0];
    let r = async_std::task::block_on(async {
        let s = async_std::net::TcpStream::connect(addr).await.expect("connects");
        raw_async(s, addr, "POST", "/api/generate", Some(BODY)).await
    });
    assert_eq!((r.status, r.json()["eval_count"].as_u64()), (200, Some(4)));
}

#[test]
fn instances_get_consecutive_ports_when_a_port_is_given() {
    // Find a free pair by binding ephemeral ports, then release them.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    match SimBuilder::new().instances(2).port(port).start() {
        Ok(sim) => {
            assert_eq!(sim.addrs()[0].port(), port);
            assert_eq!(sim.addrs()[1].port(), port + 1);
        }
        // The next port may be taken by another process; that is a bind error, not a panic.
        Err(e) => assert!(e.to_string().contains("cannot listen"), "{e}"),
    }
}
