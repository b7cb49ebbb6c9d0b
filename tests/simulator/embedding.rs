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
    // Find two free consecutive ports (setup, not the assertion: a pair another process holds
    // is skipped), release them, and start on them. The start must succeed: issue 10 found
    // the old test accepting the bind error the bug it targets would cause.
    let port = (0..50)
        .find_map(|_| {
            let a = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
            let p = a.local_addr().ok()?.port();
            let _b = std::net::TcpListener::bind(("127.0.0.1", p.checked_add(1)?)).ok()?;
            Some(p)
        })
        .expect("two consecutive free ports on loopback");
    let sim = SimBuilder::new().instances(2).port(port).start().expect("both ports were free a moment ago");
    assert_eq!(sim.addrs()[0].port(), port);
    assert_eq!(sim.addrs()[1].port(), port + 1);
}

#[test]
fn an_embedding_model_is_preloaded_with_an_empty_embed_request() {
    // It does not generate, so the load request Ollama's own clients send for it is an embed
    // with no input (server/routes.go EmbedHandler schedules the runner, then answers the
    // empty input): a preload of it loads it instead of failing on "does not support generate".
    let sim = sim_ollama::SimBuilder::new().preload("nomic-embed-text").start().unwrap();
    let ps = crate::util::raw_blocking(sim.addrs()[0], "GET", "/api/ps", None, &[]).json();
    assert_eq!(ps["models"][0]["name"], "nomic-embed-text:latest", "{ps}");
}
