// node_names.js - JavaScript functions of every kind V8 names differently,
// one calling the next, the innermost spinning: an async function, a class
// method (TableRenderer.render), a method of a plain object, an arrow
// function held in a variable, an anonymous callback.  With an argument
// "worker", a worker_threads worker spins in crunch() as well.  Prints the
// line of each function ("line NAME N"), then "ready" once the spin runs,
// and spins until killed (or for the seconds given as the second argument).
"use strict";
const { Worker, isMainThread, parentPort } = require("worker_threads");

function crunch(seconds) {
  const end = Date.now() + seconds * 1000;
  let x = 0;
  while (Date.now() < end) x += Math.cbrt(x + 2);
  return x;
}

class TableRenderer {
  render(seconds) {
    const end = Date.now() + seconds * 1000;
    let cells = 0;
    while (Date.now() < end) cells += Math.sqrt(cells + 1);
    return cells;
  }
}

const table = {
  draw(seconds) {
    return new TableRenderer().render(seconds);
  },
};

const drawArrow = (seconds) => table.draw(seconds);

async function renderPage(seconds) {
  await null;
  return drawArrow(seconds);
}

if (isMainThread) {
  const source = require("fs").readFileSync(__filename, "utf8").split("\n");
  for (const [name, pattern] of [["crunch", "function crunch"], ["render", "  render("], ["draw", "  draw("],
                                 ["drawArrow", "const drawArrow"], ["renderPage", "async function renderPage"]])
    console.log(`line ${name} ${source.findIndex((l) => l.startsWith(pattern)) + 1}`);
  const seconds = Number(process.argv[3] || 3600);
  const start = () => {
    console.log("ready");
    setTimeout(() => [seconds].forEach((s) => renderPage(s)), 50);
  };
  if (process.argv[2] === "worker") {
    const worker = new Worker(__filename, { argv: [seconds] });
    worker.on("message", start);
  } else {
    start();
  }
} else {
  parentPort.postMessage("spinning");
  crunch(Number(process.argv[2]));
}
