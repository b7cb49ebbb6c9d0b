//! `stand_in` (issue 38): a name the catalogue lacks answered by a copy of a catalogue model,
//! for programs whose model the simulator does not know.

use crate::util::raw_blocking;
use serde_json::{Value, json};
use sim_ollama::{SimBuilder, SimHandle};

fn call(sim: &SimHandle, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let body = body.map(Value::to_string);
    let r = raw_blocking(sim.addrs()[0], method, path, body.as_deref(), &[]);
    let text = r.text();
    (r.status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn tags(sim: &SimHandle) -> Vec<String> {
    let (_, v) = call(sim, "GET", "/api/tags", None);
    v["models"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap().to_string()).collect()
}

/// Every route a program names its model on answers for a name the catalogue lacks, as
/// that name; the copy is installed as a pull installs it (listed, its own runner).
#[test]
fn a_stand_in_answers_for_any_model_name_on_every_route() {
    let sim = SimBuilder::new().seed(5).time_scale(0.01).stand_in("llama3.2:1b").start().unwrap();
    assert!(!tags(&sim).contains(&"mistral:7b".to_string()));
    let chat = json!({"model": "mistral:7b", "stream": false, "messages": [{"role": "user", "content": "hi"}]});
    let (status, v) = call(&sim, "POST", "/api/chat", Some(&chat));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["model"], "mistral:7b");
    assert!(!v["message"]["content"].as_str().unwrap().is_empty());
    assert!(tags(&sim).contains(&"mistral:7b".to_string()), "installed as a pull would: {:?}", tags(&sim));

    let (status, v) = call(&sim, "POST", "/api/show", Some(&json!({"model": "mistral:7b"})));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["capabilities"], json!(["completion", "tools", "embedding"]));

    let (status, v) = call(&sim, "POST", "/api/embed", Some(&json!({"model": "my-embedder", "input": ["a", "b"]})));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["embeddings"].as_array().unwrap().len(), 2);
    assert_eq!(v["embeddings"][0].as_array().unwrap().len(), 2048, "the stand-in's embedding_length");

    let oa = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]});
    let (status, v) = call(&sim, "POST", "/v1/chat/completions", Some(&oa));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["model"], "gpt-4o-mini");
    let (status, v) =
        call(&sim, "POST", "/api/generate", Some(&json!({"model": "phi4", "prompt": "hi", "stream": false})));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["model"], "phi4");

    // Each name is its own model: four names, the default three loaded at once (mistral:7b,
    // the least recently used, evicted), none of them the stand-in's own runner.
    let (_, ps) = call(&sim, "GET", "/api/ps", None);
    let mut loaded: Vec<&str> = ps["models"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    loaded.sort();
    assert_eq!(loaded, ["gpt-4o-mini:latest", "my-embedder:latest", "phi4:latest"]);

    // A pull of such a name succeeds; a deleted catalogue model is gone, as on a real server.
    let (status, v) = call(&sim, "POST", "/api/pull", Some(&json!({"model": "deepseek-r1:8b", "stream": false})));
    assert_eq!((status, v), (200, json!({"status": "success"})));
    let (status, _) = call(&sim, "DELETE", "/api/delete", Some(&json!({"model": "gemma3"})));
    assert_eq!(status, 200);
    let (status, v) = call(&sim, "POST", "/api/generate", Some(&json!({"model": "gemma3", "prompt": "hi"})));
    assert_eq!((status, v), (404, json!({"error": "model 'gemma3' not found"})));
}

#[test]
fn without_a_stand_in_an_unknown_name_is_not_found_and_a_bad_stand_in_is_refused() {
    let sim = SimBuilder::new().time_scale(0.01).start().unwrap();
    let (status, v) = call(&sim, "POST", "/api/generate", Some(&json!({"model": "mistral:7b", "prompt": "hi"})));
    assert_eq!((status, v), (404, json!({"error": "model 'mistral:7b' not found"})));
    let e = SimBuilder::new().stand_in("mistral:7b").start().err().expect("refused").to_string();
    assert!(e.contains("stand_in \"mistral:7b\" is not in the catalogue") && e.contains("llama3.2:1b"), "{e}");
}
