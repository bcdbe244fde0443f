// node_hot.js - a hot loop that V8 optimises: spinHot() is first called
// 300 times for 1 ms (V8 optimises it on a background thread, which a
// loaded machine can delay: the long call comes half a second later), then
// spins for SECONDS (default 3) in one timer callback, in optimised code
// (or its loop compiled on the stack).  Optimised code keeps no position
// hangwatch reads: the frame's line is the function's first, and must say
// so (test_js_frames.py optimised_line).
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

for (let i = 0; i < 300; i++)
  spinHot(1);
console.log('ready');
setTimeout(() => {
  spinHot(seconds * 1000);
  setTimeout(() => console.log('hot done'), 300);
}, 500);
