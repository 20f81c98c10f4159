// M-Lab's own ndt7 client (npm @m-lab/ndt7) run in Node against one server, without M-Lab's locate
// service: `node --experimental-websocket run.cjs HOST:PORT [ws|wss]`. Node gets the browser's Worker
// from npm web-worker; the client's own worker files run unchanged. Prints one JSON object: the
// client's return code, the last client and server measurements of each subtest, and any errors.
'use strict';
globalThis.Worker = require('web-worker');
const path = require('path');
const ndt7 = require('@m-lab/ndt7');

const dir = path.dirname(require.resolve('@m-lab/ndt7'));
const [server, protocol] = [process.argv[2], process.argv[3] || 'ws'];
const out = { code: null, download: null, upload: null, server_measurements: { download: 0, upload: 0 }, errors: [] };
const count = (test) => (m) => {
  if (m.Source === 'server') out.server_measurements[test] += 1;
};
ndt7.test({
  server,
  protocol,
  userAcceptedDataPolicy: true,
  downloadworkerfile: path.join(dir, 'ndt7-download-worker.js'),
  uploadworkerfile: path.join(dir, 'ndt7-upload-worker.js'),
  metadata: { client_name: 'landspeed-interop-test' },
}, {
  error: (e) => out.errors.push(String(e)),
  downloadMeasurement: count('download'),
  uploadMeasurement: count('upload'),
  downloadComplete: (d) => { out.download = d; },
  uploadComplete: (d) => { out.upload = d; },
}).then((code) => {
  out.code = code;
  console.log(JSON.stringify(out));
  process.exit(0);
}, (err) => {
  out.errors.push(String(err));
  console.log(JSON.stringify(out));
  process.exit(1);
});
