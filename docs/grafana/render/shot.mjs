// Screenshot of the rendered dashboard through the Chrome DevTools protocol:
// node --experimental-websocket shot.mjs CHROMIUM URL OUT.png WIDTH PROFILE_DIR
// Starts headless Chromium, waits for window.rendered, prints
// window.renderReport and captures the whole page.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';

const [chromium, url, out, width, profile] = process.argv.slice(2);
const proc = spawn(
  chromium,
  [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--hide-scrollbars',
    '--remote-debugging-port=0',
    `--user-data-dir=${profile}`,
    `--window-size=${width},1000`,
    'about:blank',
  ],
  { stdio: ['ignore', 'ignore', 'pipe'] }
);
const exited = new Promise((r) => proc.on('exit', r));
// The profile directory is the caller's (shot.sh's run directory, removed
// at the next run): Chromium's helpers may still write there after it exits.
const cleanup = async () => {
  proc.kill();
  await exited;
};

function fail(msg) {
  console.error(msg);
  cleanup().finally(() => process.exit(1));
  return new Promise(() => {}); // never: the process exits
}

const wsUrl = await new Promise((resolve, reject) => {
  let buf = '';
  proc.stderr.on('data', (d) => {
    buf += d;
    const m = /DevTools listening on (ws:\/\/\S+)/.exec(buf);
    if (m) {
      resolve(m[1]);
    }
  });
  proc.on('exit', (c) => reject(new Error(`chromium exited (${c}): ${buf}`)));
}).catch((e) => fail(String(e)));

const port = new URL(wsUrl).port;
const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
const page = targets.find((t) => t.type === 'page');
const ws = new WebSocket(page.webSocketDebuggerUrl);
await new Promise((r) => ws.addEventListener('open', r));
let seq = 0;
const pending = new Map();
ws.addEventListener('message', (ev) => {
  const msg = JSON.parse(ev.data);
  if (msg.id && pending.has(msg.id)) {
    pending.get(msg.id)(msg);
    pending.delete(msg.id);
  }
});
function send(method, params = {}) {
  const id = ++seq;
  ws.send(JSON.stringify({ id, method, params }));
  return new Promise((resolve) => pending.set(id, resolve)).then((m) => {
    if (m.error) {
      return fail(`${method}: ${JSON.stringify(m.error)}`);
    }
    return m.result;
  });
}
async function evaluate(expr) {
  const r = await send('Runtime.evaluate', { expression: expr, returnByValue: true });
  return r.result.value;
}

await send('Page.enable');
await send('Emulation.setDeviceMetricsOverride', { width: Number(width), height: 1000, deviceScaleFactor: 1, mobile: false });
await send('Page.navigate', { url });
// A deadline on a wait for a browser, not a test's limit: the queries to a
// local Prometheus take seconds.
const deadline = Date.now() + 120e3;
while (!(await evaluate('window.rendered === true'))) {
  if (Date.now() > deadline) {
    await fail('the page did not render within 120 s');
  }
  await new Promise((r) => setTimeout(r, 250));
}
const err = await evaluate('window.renderError');
if (err) {
  await fail(`render failed: ${err}`);
}
const report = await evaluate('window.renderReport');
for (const p of report) {
  console.log(
    `${p.type.padEnd(15)} ${p.title.padEnd(48)} ${p.error ? 'ERROR ' + p.error : `${p.series} series, ${p.points} points`}`
  );
}
// The whole page: the dashboard's width and its padding, every row.
const full = await evaluate('[document.documentElement.scrollWidth, document.documentElement.scrollHeight]');
const [w, height] = full.map((x) => Math.ceil(x));
await send('Emulation.setDeviceMetricsOverride', { width: w, height, deviceScaleFactor: 1, mobile: false });
await new Promise((r) => setTimeout(r, 1000));
const shot = await send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true });
writeFileSync(out, Buffer.from(shot.data, 'base64'));
console.log(`${out}: ${w} x ${height}`);
ws.close();
await cleanup();
const bad = report.filter((p) => p.error);
process.exit(bad.length > 0 ? 1 : 0);
