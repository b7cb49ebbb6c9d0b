//! Real client programs in other languages, run under `harness exec` against the simulator
//! and judged: correct programs pass, every serialization bug fails, labelled or not.
//! Issue 9; see docs/judge.md.

// Client programs: Python (official ollama client, raw asyncio) and Node (built-in fetch).
mod programs;
// The Python wheel and its pytest plugin, on a sample user project (ollama-python, LangGraph).
mod python_package;
// A Node project's node:test suite asserting on GET /sim/judge.
mod node_project;
