// node_busy_timer.js - a node program whose timer callback busy-loops for
// 3 s on the main thread (a hang), for hangwatch's tests.
setTimeout(function busyLoopForThreeSeconds() {
  const end = Date.now() + 3000;
  while (Date.now() < end) {}
  console.log("node: busy loop done");
}, 300);
