//! A user's multi-agent program, as it might be written with tokio and reqwest, and the tests
//! (in `tests/`) that check it with sim-ollama's judge. Run with `cargo nextest run -p
//! agent-check`.
//!
//! Each agent holds a chat with a growing history: two turns, local work between them. The
//! program can be run correctly or with one of the bugs that silently serialize agents, so the
//! tests can show the judge telling them apart:
//!
//! - [`Bug::None`]: every agent in its own task, all at once.
//! - [`Bug::AwaitedInTurn`]: the agents awaited one after another in a loop.
//! - [`Bug::SharedMutex`]: a `tokio::sync::Mutex` held across every call (a lock used as a
//!   semaphore).
//! - [`Bug::OnePermit`]: a `Semaphore` with one permit around every call.
//! - [`Bug::BlockingCall`]: a blocking HTTP call inside the async agent (a `std::net` request
//!   on a current-thread runtime).
//!
//! [`run_with_tool`] runs the same agents with a tool between their two turns ([`Tool`]): awaited
//! or on tokio's blocking pool, correct; `std::thread::sleep` inside the async agent, the bug
//! that makes agents on a current-thread runtime wait for each other's tools (issue 36).

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

/// How the program runs its agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bug {
    /// Correct: all agents at once.
    None,
    /// The agents awaited one after another.
    AwaitedInTurn,
    /// A mutex held across every call.
    SharedMutex,
    /// A one-permit semaphore around every call.
    OnePermit,
    /// A blocking call inside async code.
    BlockingCall,
}

/// The program's settings.
#[derive(Debug, Clone)]
pub struct Program {
    /// Ollama's base URL, `http://host:port`.
    pub base: String,
    /// Number of agents.
    pub agents: usize,
    /// Whether each agent sends its name in the `X-Agent` header.
    pub labelled: bool,
    /// The bug, if any.
    pub bug: Bug,
}

/// What went wrong in a call.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

const TURNS: [&str; 2] = ["Plan the next step of the incident review.", "Now list the three riskiest parts."];

fn body(history: &[serde_json::Value]) -> serde_json::Value {
    serde_json::json!({"model": "gemma3", "messages": history, "stream": false, "options": {"num_predict": 30}})
}

async fn chat_async(
    client: &reqwest::Client,
    p: &Program,
    name: &str,
    history: &[serde_json::Value],
) -> Result<serde_json::Value, Error> {
    let mut req = client.post(format!("{}/api/chat", p.base)).json(&body(history));
    if p.labelled {
        req = req.header("X-Agent", name);
    }
    Ok(req.send().await?.error_for_status()?.json().await?)
}

/// The bug: an HTTP call with `std::net`, which blocks the thread the async agent runs on.
fn chat_blocking(p: &Program, name: &str, history: &[serde_json::Value]) -> Result<serde_json::Value, Error> {
    let host = p.base.trim_start_matches("http://");
    let payload = body(history).to_string();
    let label = if p.labelled { format!("X-Agent: {name}\r\n") } else { String::new() };
    let mut s = std::net::TcpStream::connect(host)?;
    write!(
        s,
        "POST /api/chat HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{label}Content-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    )?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let json = raw.split_once("\r\n\r\n").map(|(_, b)| b).ok_or("no HTTP body")?;
    Ok(serde_json::from_str(json)?)
}

/// The work an agent does between its two turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// An awaited timer of this many milliseconds.
    Awaited(u64),
    /// `std::thread::sleep` on `tokio::task::spawn_blocking`, awaited.
    BlockingPool(u64),
    /// The bug: `std::thread::sleep` inside the async agent, holding its executor's thread.
    Blocking(u64),
}

impl Tool {
    async fn run(self) {
        match self {
            Tool::Awaited(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            Tool::BlockingPool(ms) => {
                let _ = tokio::task::spawn_blocking(move || std::thread::sleep(Duration::from_millis(ms))).await;
            }
            Tool::Blocking(ms) => std::thread::sleep(Duration::from_millis(ms)),
        }
    }
}

async fn agent(
    client: reqwest::Client,
    p: Arc<Program>,
    name: String,
    mutex: Arc<tokio::sync::Mutex<()>>,
    permit: Arc<tokio::sync::Semaphore>,
    tool: Tool,
) -> Result<u64, Error> {
    let mut history = vec![serde_json::json!({"role": "system", "content": format!("You are {name}.")})];
    let mut tokens = 0;
    for turn in TURNS {
        history.push(serde_json::json!({"role": "user", "content": turn}));
        let reply = match p.bug {
            Bug::SharedMutex => {
                let _held = mutex.lock().await;
                chat_async(&client, &p, &name, &history).await?
            }
            Bug::OnePermit => {
                let _permit = permit.acquire().await?;
                chat_async(&client, &p, &name, &history).await?
            }
            Bug::BlockingCall => chat_blocking(&p, &name, &history)?,
            Bug::None | Bug::AwaitedInTurn => chat_async(&client, &p, &name, &history).await?,
        };
        tokens += reply["eval_count"].as_u64().unwrap_or(0);
        history.push(serde_json::json!({"role": "assistant", "content": reply["message"]["content"]}));
        tool.run().await; // local work between turns
    }
    Ok(tokens)
}

/// Runs the program's agents; returns the tokens each received. Call it on any tokio runtime
/// (the blocking bug shows on a current-thread one, where `#[tokio::test]` runs).
pub async fn run(p: Program) -> Result<Vec<u64>, Error> {
    run_with_tool(p, Tool::Awaited(10)).await
}

/// [`run`] with `tool` as each agent's work between its turns.
pub async fn run_with_tool(p: Program, tool: Tool) -> Result<Vec<u64>, Error> {
    let p = Arc::new(p);
    let client = reqwest::Client::new();
    let mutex = Arc::new(tokio::sync::Mutex::new(()));
    let permit = Arc::new(tokio::sync::Semaphore::new(1));
    let names: Vec<String> = (0..p.agents).map(|i| format!("rs-{i}")).collect();
    let mut counts = Vec::new();
    if p.bug == Bug::AwaitedInTurn {
        for n in names {
            counts.push(agent(client.clone(), Arc::clone(&p), n, Arc::clone(&mutex), Arc::clone(&permit), tool).await?);
        }
    } else {
        let tasks: Vec<_> = names
            .into_iter()
            .map(|n| {
                tokio::spawn(agent(client.clone(), Arc::clone(&p), n, Arc::clone(&mutex), Arc::clone(&permit), tool))
            })
            .collect();
        for t in tasks {
            counts.push(t.await??);
        }
    }
    Ok(counts)
}
