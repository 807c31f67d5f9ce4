// A second client process: resumes the task whose serialized reference is in the file
// named on the command line, waits for it to settle, and prints what the client's API
// returned as one JSON line.
//
//     node resume.mjs URL REFERENCE_FILE
import { readFile } from "node:fs/promises";
import { connect } from "./harness.mjs";

const [url, referenceFile] = process.argv.slice(2);
const reference = JSON.parse(await readFile(referenceFile, "utf8"));
const connected = await connect(url);
try {
  const execution = await connected.session.resumeTask(reference);
  const { outcome, lastTask } = await execution.settle();
  console.log(
    JSON.stringify({
      kind: execution.kind,
      taskId: execution.handle.taskId,
      status: outcome.status,
      result: outcome.result,
      lastStatus: lastTask?.status,
    }),
  );
} finally {
  await connected.close();
}
