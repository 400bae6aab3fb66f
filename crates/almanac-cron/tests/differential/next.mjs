// The reference side of almanac-cron's differential test.
//
// Reads from stdin a JSON array of cases {expr, tz, from, count} (from in
// epoch milliseconds) and writes one JSON object to stdout:
//   {"results": [{"next": [ms, ...]} | {"error": "..."} | {"failed": "..."}],
//    "pastAnswers": n}
// `error`: croner refuses the expression; `failed`: croner accepted it but
// threw while searching (its recursion overflows the stack on some rare
// schedules), so there is nothing to compare.
//
// Each fire is asked of croner from the one before, as a scheduler does.
// Asked from the second pass of a repeated (fall-back) hour, croner answers
// a time of that hour's first pass, which is already gone; such answers are
// passed over by asking again from them, and counted in pastAnswers.
import { Cron } from "croner";

let input = "";
for await (const chunk of process.stdin) {
  input += chunk;
}

let pastAnswers = 0;
const results = JSON.parse(input).map(({ expr, tz, from, count }) => {
  let cron;
  try {
    cron = new Cron(expr, { timezone: tz, catch: false });
  } catch (err) {
    return { error: String(err && err.message ? err.message : err) };
  }
  const next = [];
  let cursor = from;
  try {
    while (next.length < count) {
      let answer = cron.nextRun(new Date(cursor));
      while (answer && answer.getTime() <= cursor) {
        pastAnswers += 1;
        answer = cron.nextRun(answer);
      }
      if (!answer) {
        break;
      }
      cursor = answer.getTime();
      next.push(cursor);
    }
  } catch (err) {
    return { failed: String(err && err.message ? err.message : err) };
  }
  return { next };
});
process.stdout.write(JSON.stringify({ results, pastAnswers }));
