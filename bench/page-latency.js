// The speed-test page's working latency, read from a real headless Chromium over DevTools (by hand,
// not in CI): node --experimental-websocket bench/page-latency.js 'http://SERVER:PORT/?autostart'
// Prints each phase's median, p90, foreign round trip and probe count, and both rates. Run it where
// the browser should be (`landspeed wan exec NAME a -- node ...`), beside `landspeed latency` on the
// same path (docs/latency.md, "In the browser"). Each phase's start is printed as it is seen
// (`phase NAME at EPOCH_MS`, the page's state read every 100 ms), so probes another tool sends during
// the page's own load can be sorted into its phases (bench/page-beside).
'use strict';
const { spawn } = require('child_process');
const url = process.argv[2];
const port = 9300 + (process.pid % 600);
const chrome = spawn('chromium', ['--headless', '--no-sandbox', '--disable-gpu',
  '--user-data-dir=/tmp/landspeed-page-latency-' + process.pid, '--remote-debugging-port=' + port, 'about:blank'],
  { stdio: ['ignore', 'ignore', 'pipe'] });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let started = false;
chrome.stderr.on('data', (d) => { if (!started && /DevTools listening/.test(String(d))) { started = true; go().catch(fail); } });
setTimeout(() => fail(new Error('no answer within 120 s')), 120000);

function fail(e) { console.error(String(e)); chrome.kill(); process.exit(1); }

async function go() {
  const list = await (await fetch('http://127.0.0.1:' + port + '/json')).json();
  const ws = new WebSocket(list.find((t) => t.type === 'page').webSocketDebuggerUrl);
  let id = 0;
  const pending = {};
  const call = (method, params = {}) => new Promise((r) => { const i = ++id; pending[i] = r; ws.send(JSON.stringify({ id: i, method, params })); });
  const evaluate = async (expression) => (await call('Runtime.evaluate', { expression, returnByValue: true })).result.value;
  ws.onmessage = (ev) => { const m = JSON.parse(ev.data); if (m.id && pending[m.id]) { pending[m.id](m.result); delete pending[m.id]; } };
  await new Promise((r) => { ws.onopen = r; });
  await call('Page.navigate', { url });
  let seen = '';
  for (let i = 0; i < 1000; i++) {
    await sleep(100);
    const st = await evaluate("(document.getElementById('state') || {}).textContent");
    if (st && st !== seen) { seen = st; console.log(`phase ${st.replace('…', '').replace('latency, ', '')} at ${Date.now()}`); }
    if (st === 'done' || st === 'failed') { break; }
  }
  const o = JSON.parse(await evaluate("JSON.stringify({ r: window.landspeedResult || null, err: document.getElementById('error').textContent })"));
  if (!o.r) { fail(new Error('the page did not finish: ' + o.err)); }
  const f = (x) => (x === null || x === undefined ? '-' : x.toFixed(2));
  for (const k of ['idle', 'download', 'upload']) {
    const s = o.r.latency[k];
    console.log(`${k.padEnd(9)} round trip ${f(s.foreign_ms)} ms (TCP ${f(s.tcp_median_ms)}, request ${f(s.http_median_ms)} median)  whole probe median ${f(s.median_ms)} p90 ${f(s.p90_ms)} ms  probes ${s.probes} (failed ${s.failed})`);
  }
  console.log(`download ${f(o.r.download_mbps)} Mbit/s, upload ${f(o.r.upload_mbps)} Mbit/s ${o.err}`);
  chrome.kill();
  process.exit(0);
}
