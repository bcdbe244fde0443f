// node_frames.js - a node event loop whose timer callback calls
// renderHugeTable(), which spins 3 s on the main thread: hangwatch's report
// must name renderHugeTable with this file and its line.  The line of the
// function is printed first ("line renderHugeTable N"), so the tests never
// hard-code it.
"use strict";

function renderHugeTable(rows) {
  const end = Date.now() + 3000;
  let cells = 0;
  while (Date.now() < end) {
    for (let i = 0; i < rows; i++) cells += (i * 31) % 7;
  }
  return cells;
}

const source = require("fs").readFileSync(__filename, "utf8").split("\n");
console.log(`line renderHugeTable ${source.findIndex((l) => l.startsWith("function renderHugeTable")) + 1}`);
console.log(`pid ${process.pid}`);
console.log(`NODE_OPTIONS=${process.env.NODE_OPTIONS || ""}`);

setTimeout(function onRenderTimer() {
  const cells = renderHugeTable(1000);
  console.log(`node_frames: rendered ${cells > 0 ? "some" : "no"} cells`);
}, 300);
