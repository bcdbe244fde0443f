// node_busy_timer.js - a node program whose timer callback busy-loops for
// 2.6 s on the main thread (a hang), for hangwatch's tests.  Node exits
// right after it without waiting again, so its teardown belongs to the same
// busy stretch; 2.6 s keeps the annealing re-check (one check period after
// detection, at 3 s) clear of that teardown, whose stack would rightly be a
// second report.
setTimeout(function busyLoopForTwoAndAHalfSeconds() {
  const end = Date.now() + 2600;
  while (Date.now() < end) {}
  console.log("node: busy loop done");
}, 300);
