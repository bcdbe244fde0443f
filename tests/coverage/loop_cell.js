// loop_cell.js - the coverage matrix's row for node (libuv), as
// loop_cell.py is for Python's loops: node's loop turns every 20 ms; once
// GO_FILE exists it blocks DELAY s later in holdTheLoopWithKIND for each of
// KINDS in turn, 1.2 s of turning between them, then turns a while and
// exits ("none": it only turns, every 1 ms, for 60 s).
//
//     node loop_cell.js KINDS PORT GO_FILE DELAY HOLD
//
// KINDS, comma-separated: sleep (Atomics.wait on a buffer nobody notifies), spin, fifo
// (fs.readFileSync of a FIFO a child writes after HOLD s), child
// (execSync of sleep HOLD: a second libuv loop), lock (Atomics.wait for a
// worker that holds the lock HOLD s), cext (crypto.pbkdf2Sync, HOLD s of
// it).  node has no synchronous HTTP client: no http kind.
'use strict';
const { execSync, spawn } = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { Worker } = require('worker_threads');

const [kindsArg, , goFile, delayArg, holdArg] = process.argv.slice(2);
const delay = parseFloat(delayArg), hold = parseFloat(holdArg);
const idle = kindsArg === 'none';
const holds = idle ? [] : kindsArg.split(',');
const tick = idle ? 1 : 20;
const tail = idle ? 60 : 1.5;
const gap = 1.2;

function holdTheLoopWithSleep() {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, hold * 1000);
}

function holdTheLoopWithSpin() {
  const end = Date.now() + hold * 1000;
  let n = 0;
  while (Date.now() < end) n++;
  return n;
}

function holdTheLoopWithFifo() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hw-cell-'));
  const fifo = path.join(dir, 'fifo');
  execSync(`mkfifo ${fifo}`);
  spawn('sh', ['-c', `sleep ${hold}; echo late > ${fifo}`], { stdio: 'ignore' });
  return fs.readFileSync(fifo, 'utf8');
}

function holdTheLoopWithChild() {
  return execSync(`sleep ${hold}`);
}

function holdTheLoopWithLock(shared) {
  // The worker has the lock (shared[0] == 1) and lets it go after hold s.
  while (Atomics.load(shared, 0) === 1) Atomics.wait(shared, 0, 1);
  return true;
}

function holdTheLoopWithCext() {
  const end = Date.now() + hold * 1000;
  let n = 0;
  while (Date.now() < end) { crypto.pbkdf2Sync('secret', 'salt', 20000, 64, 'sha512'); n++; }
  return n;
}

const holders = { sleep: holdTheLoopWithSleep, spin: holdTheLoopWithSpin, fifo: holdTheLoopWithFifo,
  child: holdTheLoopWithChild, cext: holdTheLoopWithCext };

let turns = 0, nextAt = null, endAt = null;
function turn() {
  turns++;
  const now = Date.now() / 1000;
  if (turns === 3) console.log(`ready ${process.pid}`);
  if (nextAt === null && turns >= 3 && fs.existsSync(goFile)) {
    nextAt = now + delay;
    if (idle) endAt = now + tail;
  }
  if (holds.length > 0 && nextAt !== null && now >= nextAt) {
    const kind = holds.shift();
    const start = Date.now();
    if (kind === 'lock') {
      const shared = new Int32Array(new SharedArrayBuffer(4));
      Atomics.store(shared, 0, 1);
      const w = new Worker(`const { workerData } = require('worker_threads');
        const s = workerData.shared;
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, workerData.hold * 1000);
        Atomics.store(s, 0, 0); Atomics.notify(s, 0);`, { eval: true, workerData: { shared, hold } });
      // The worker must be running before the wait (it holds the lock now).
      w.unref();
      holdTheLoopWithLock(shared);
    } else {
      holders[kind]();
    }
    console.log(`held ${kind} ${((Date.now() - start) / 1000).toFixed(3)}`);
    nextAt = Date.now() / 1000 + gap;
    if (holds.length === 0) endAt = Date.now() / 1000 + tail;
  }
  if (endAt !== null && now >= endAt) {
    console.log('done');
    process.exit(0);
  }
  setTimeout(turn, tick);
}
setTimeout(turn, tick);
