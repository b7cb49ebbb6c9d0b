//! The simulator's conformance to Ollama's API, its determinism, pacing and embedding.
//! See: issue 2.

use suite as util;

// Endpoint shapes, content types and field orders against the captures.
mod conformance;
// Status codes and error bodies, native and OpenAI.
mod errors;
// Same seed, same bytes; frozen-clock snapshots.
mod determinism;
// Tokens leave at their scheduled times (serial timing group).
mod pacing;
// The library handle from tokio, smol, async-std and plain threads.
mod embedding;
// Agent loops: tool calls native and /v1, structured outputs.
mod tools;
// Scripted turns: TOML, builder, /sim/script.
mod script;
// Noise on purpose: seeded jitter, hiccups, contention between devices.
mod noise;
// Thinking models: reasoning before the answer, think levels, reasoning_effort (issue 12).
mod thinking;
// Context limits: history truncation, prompt truncation, refusals, the generation cap (issue 12).
mod context;
// /v1/messages: the Anthropic Messages API (issue 12).
mod anthropic;
// /v1/responses: the OpenAI Responses API (issue 12).
mod responses;
// The judge over HTTP: /sim/mark, /sim/judge, preloaded models (issue 24).
mod judge_http;
// The shared helpers' own tests (tests/util.rs is in every binary; its tests run here only).
mod util_tests;
// Probe runs: answers held back so the agents work one at a time (issue 36).
mod probe;
// Log probabilities on generate, chat and /v1 chat (issue 38).
mod logprobs;
// /api/embed's context: truncation and its errors (issue 38).
mod embed_context;
/// A name the catalogue lacks answered by a stand-in (issue 38).
mod stand_in;
