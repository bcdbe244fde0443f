// node_hot.js - a hot loop that V8 optimises while it runs: spinHot()
// spins for SECONDS (default 3) in one timer callback.  Its loop is
// compiled on the stack (on-stack replacement) within milliseconds, and
// optimised code keeps no position hangwatch reads: the frame's line is the
// function's first, and must say so (test_js_frames.py optimised_line).
// Prints "ready" and "hot done".
'use strict';
const seconds = Number(process.argv[2] || 3);

function spinHot(ms) {
  const end = Date.now() + ms;
  let turns = 0;
  while (Date.now() < end) {
    turns += (turns * 7 + 3) % 11;
  }
  return turns;
}

console.log('ready');
setTimeout(() => {
  spinHot(seconds * 1000);
  setTimeout(() => console.log('hot done'), 300);
}, 300);
