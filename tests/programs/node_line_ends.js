// node_line_ends.js - a node process built to make hangwatch read and keep
// as much as it can of V8's scripts: a call chain of DEPTH functions, each
// in a script of its own (vm.runInThisContext, a file name each) whose
// source starts with a million blank lines, so that every frame's line is
// a count over a megabyte of source and a 4 MiB table of line ends.  The
// innermost function spins for SECONDS (default 3), called from a timer
// once the scripts are compiled.  Prints "spin" as the hang starts and "done" at the end; then waits in its event loop for
// LINGER seconds (default 0) before it exits, the chain's functions still
// alive, so that a capture taken at the spin's very end can still have
// them named (once node exits, its heap cannot be read).
"use strict";
const vm = require("vm");

const DEPTH = 100;
const BLANK_LINES = (1 << 20) - 64; // below hangwatch's bound on a script's line ends
const seconds = Number(process.argv[2] || 3);
const linger = Number(process.argv[3] || 0);

function spin() {
  const end = Date.now() + seconds * 1000;
  let x = 0;
  while (Date.now() < end) x += Math.sqrt(x + 1);
  return x;
}

// chain[k] calls chain[k + 1]; the last calls spin().  Each body differs
// (its index is in it), each is compiled from its own source, one per turn
// of the event loop: compiled at once, the hundred megabytes of source took
// over two seconds of a loaded machine before the loop's first wait, a
// launch hang of its own beside the spin's.
const blank = "\n".repeat(BLANK_LINES);
const chain = [];

function compileNext() {
  const k = chain.length;
  if (k < DEPTH) {
    const source = `${blank}(function chain${k}(all, spin) {\n` +
      `  const next = all[${k + 1}];\n` +
      `  return (next ? next(all, spin) : spin()) + ${k};\n})`;
    chain.push(vm.runInThisContext(source, { filename: `chain_${k}.js` }));
    setTimeout(compileNext, 1);
    return;
  }
  process.stdout.write("spin\n");
  const first = chain[0]; // called as a plain function, not as the array's method
  first(chain, spin);
  process.stdout.write("done\n");
  if (linger > 0) setTimeout(() => chain.length, linger * 1000);
}

setTimeout(compileNext, 1);
