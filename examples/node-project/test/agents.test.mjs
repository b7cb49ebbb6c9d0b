// The project's tests: each runs the team against a fresh simulator and asserts that the judge
// calls the reviewers parallel. `reviewInTurn` fails on purpose, with the report as message.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startSim, explain } from "../sim.mjs";
import { review, reviewInTurn } from "../agents.mjs";

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
