// The project's tests: each runs the team against a fresh simulator and asserts that the judge
// calls the reviewers parallel. `reviewInTurn` fails on purpose, with the report as message.
import { spawn } from "node:child_process";
import { test } from "node:test";
import assert from "node:assert/strict";
import { startSim, explain } from "../sim.mjs";
import { review, reviewInTurn, triage, triageBlocking } from "../agents.mjs";

async function judged(program, simOptions) {
  const sim = await startSim(simOptions);
  try {
    await sim.mark();
    await program(sim.url);
    return await sim.judge({ expect: "parallel" });
  } finally {
    await sim.stop();
  }
}

test("review runs the reviewers together", async () => {
  const doc = await judged(review);
  assert.ok(doc.passed, explain(doc));
});

// The reviewers' calls are short (30 tokens): their per-call overhead, paid before a slot,
// still overlaps, so the deployment allows part of an ideal server's saving (`partial`) or,
// where the program's own time between calls hides the queueing, most of it (`full`); either
// way the slot's queueing is its largest cost.
test("one slot is the server's limit, not the program's fault", async () => {
  const doc = await judged(review, { preset: "single-1slot" });
  assert.ok(doc.passed, explain(doc));
  assert.equal(doc.report.deployment.costs[0]?.limit, "slots", explain(doc));
});

test("reviewInTurn runs the reviewers together", async () => {
  const doc = await judged(reviewInTurn);
  assert.ok(doc.passed, explain(doc));
});

test("an unknown model is refused with the names of the known ones", async () => {
  await assert.rejects(startSim({ models: ["llama9"] }), /llama9.*gemma3:latest/s);
});

// Agents with a lookup between two calls and nothing telling them apart: the verdict waits on
// a probe run, which releases one answer at a time; told three triagers run at once, its
// chains of calls are them.
async function judgedProgram(program, params) {
  const sim = await startSim();
  try {
    return await sim.judgeProgram(program, params);
  } finally {
    await sim.stop();
  }
}

test("triagers whose lookups await run together", async () => {
  const doc = await judgedProgram(triage, { agents: 3, expect: "parallel" });
  assert.ok(doc.passed, explain(doc));
  assert.equal(doc.report.agents_from, "probe", explain(doc));
});

test("a lookup that blocks the event loop is caught between the calls", async () => {
  const doc = await judgedProgram(triageBlocking, { agents: 3 });
  assert.notEqual(doc.report.verdict, "parallel", explain(doc));
  assert.equal(doc.report.cause, "between_calls", explain(doc));
  // Resting on waits the probe found, the verdict was confirmed by a third run.
  assert.equal(doc.report.confirmation?.waits_recurred, true, explain(doc));
});

// A machine too busy to run the simulator on time, made on purpose: in the first run the
// simulator's process stops for 0.6 s while the reviewers' first calls stream (time scale 0.5:
// they take ~0.3 s). The run's loss is the simulator's own lateness (`simulator_late`), so
// judgeProgram runs the program once more in a new window, whose verdict stands.
test("a run the simulator itself was late for is run again, and the second verdict stands", async () => {
  const sim = await startSim({ timeScale: 0.5 });
  let runs = 0;
  try {
    const doc = await sim.judgeProgram(async (url) => {
      runs += 1;
      if (runs === 1) spawn("sh", ["-c", `sleep 0.05; kill -STOP ${sim.pid}; sleep 0.6; kill -CONT ${sim.pid}`]);
      await review(url);
    });
    assert.equal(runs, 2, explain(doc));
    assert.equal(doc.report.verdict, "parallel", explain(doc));
  } finally {
    await sim.stop();
  }
});
