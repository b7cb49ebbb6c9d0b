// The project's tests: each runs the team against a fresh simulator and asserts that the judge
// calls the reviewers parallel. `reviewInTurn` fails on purpose, with the report as message.
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

test("one slot is the server's limit, not the program's fault", async () => {
  const doc = await judged(review, { preset: "single-1slot" });
  assert.ok(doc.passed, explain(doc));
  assert.equal(doc.report.deployment.limit, "slots", explain(doc));
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
