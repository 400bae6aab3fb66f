// The reference side of almanac-cron's differential test.
//
// Reads from stdin a JSON array of cases {expr, tz, from, count, ours}
// (times in epoch milliseconds; `ours` the fires almanac found) and
// writes one JSON object to stdout:
//   {"results": [{"next": [ms, ...], "offsets": [s, ...], "matchesOurs": [bool, ...]}
//                | {"error": "..."} | {"failed": "..."} | {"unknownZone": "..."}],
//    "pastAnswers": n, "tzVersion": "2025c"}
// `error`: croner refuses the expression; `failed`: croner accepted it but
// threw while searching (its recursion overflows the stack on some rare
// schedules), so there is nothing to compare; `unknownZone`: Node's time
// zone data does not know the zone.
//
// `offsets` are the zone's UTC offsets (seconds) in Node's zone data, the
// data croner works with, at `from`, then at each of `ours`, then at each
// of `next`: the test compares only cases where they are almanac's too.
// `matchesOurs` says whether croner's own `match` accepts each of ours.
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

const formats = new Map();

// The formatter that names a zone's offset, or null for a zone Node's data
// does not know.
function offsetFormat(tz) {
  if (!formats.has(tz)) {
    let format = null;
    try {
      format = new Intl.DateTimeFormat("en-US", { timeZone: tz, timeZoneName: "longOffset" });
    } catch {
      format = null;
    }
    formats.set(tz, format);
  }
  return formats.get(tz);
}

// "GMT", "GMT+05:30", "GMT-03:00" (or with seconds) in seconds east of UTC.
function offsetSeconds(format, ms) {
  const name = format.formatToParts(new Date(ms)).find((p) => p.type === "timeZoneName").value;
  const m = /^GMT(?:([+-])(\d\d):(\d\d)(?::(\d\d))?)?$/.exec(name);
  if (!m) {
    throw new Error(`unexpected offset name ${name}`);
  }
  if (!m[1]) {
    return 0;
  }
  const seconds = Number(m[2]) * 3600 + Number(m[3]) * 60 + Number(m[4] || 0);
  return m[1] === "-" ? -seconds : seconds;
}

let pastAnswers = 0;
const results = JSON.parse(input).map(({ expr, tz, from, count, ours }) => {
  const format = offsetFormat(tz);
  if (!format) {
    return { unknownZone: tz };
  }
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
  const offsets = [from, ...ours, ...next].map((ms) => offsetSeconds(format, ms));
  const matchesOurs = ours.map((ms) => cron.match(new Date(ms)));
  return { next, offsets, matchesOurs };
});
process.stdout.write(JSON.stringify({ results, pastAnswers, tzVersion: process.versions.tz }));
