// node_gc.js - garbage collection in a node loop, for the GC tests
// (tests/integration/test_js_frames.py):
//
//   node --expose-gc node_gc.js pause OBJECTS  build a heap of OBJECTS small
//       objects over many short timer turns, then, in one timer callback,
//       compactHeap() runs two full collections (a long mark-compact each)
//   node node_gc.js alloc SECONDS  buildRows() allocates rows for SECONDS in
//       one turn: the collector runs again and again under it
//
// Prints "ready", "line NAME N" for the functions the tests look for, and
// "MODE done" at the end.
'use strict';
const mode = process.argv[2];
const arg = Number(process.argv[3]);
const keep = [];

function buildChunk(count) {
  for (let i = 0; i < count; i++) keep.push({ a: i, b: [i, i + 1], c: 'row ' + i });
}

function compactHeap() {
  const took = [];
  for (let k = 0; k < 2; k++) {
    const t = Date.now();
    global.gc();
    took.push(Date.now() - t);
  }
  return took;
}

function buildRows(seconds) {
  const end = Date.now() + seconds * 1000;
  let rows = [];
  let made = 0;
  while (Date.now() < end) {
    rows.push({ id: made, name: 'row ' + made, cells: [made, made * 2, String(made)] });
    made++;
    if (rows.length > 200000) rows = [];
  }
  return made;
}

function pause(objects) {
  const step = 50000;
  function more() {
    if (keep.length < objects) {
      buildChunk(step);
      setTimeout(more, 1);
      return;
    }
    console.log('ready');
    setTimeout(() => {
      console.log('gc took ' + compactHeap().join(' ') + ' ms');
      setTimeout(() => console.log('pause done'), 500);
    }, 300);
  }
  more();
}

if (mode === 'pause') {
  pause(arg || 3000000);
} else if (mode === 'alloc') {
  console.log('ready');
  setTimeout(() => {
    console.log('made ' + buildRows(arg || 9));
    setTimeout(() => console.log('alloc done'), 300);
  }, 300);
} else {
  console.error('usage: node_gc.js pause OBJECTS | alloc SECONDS');
  process.exit(2);
}
