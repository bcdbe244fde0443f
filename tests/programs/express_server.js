// express_server.js - an express web server whose /table handler calls
// renderHugeTable(), which loops synchronously for 3 s: a hang of the whole
// server, for the tests of JavaScript frames (test_js_frames.py).  express
// comes from NODE_PATH (scripts/fetch-npm.sh express).  Prints the line of
// renderHugeTable ("line renderHugeTable N"), its pid, its NODE_OPTIONS, then
// "listening PORT"; ends after the first request to /quit.
"use strict";
const express = require("express");

function renderHugeTable(seconds) {
  const end = Date.now() + seconds * 1000;
  let cells = 0;
  while (Date.now() < end) {
    for (let i = 0; i < 1000; i++) cells += (i * 31) % 7;
  }
  return cells;
}

const app = express();
app.get("/table", (req, res) => {
  const cells = renderHugeTable(3);
  res.send(`rendered ${cells > 0 ? "some" : "no"} cells\n`);
});
app.get("/quit", (req, res) => {
  res.send("bye\n");
  server.close();
});

const source = require("fs").readFileSync(__filename, "utf8").split("\n");
console.log(`line renderHugeTable ${source.findIndex((l) => l.startsWith("function renderHugeTable")) + 1}`);
console.log(`pid ${process.pid}`);
console.log(`NODE_OPTIONS=${process.env.NODE_OPTIONS || ""}`);
const server = app.listen(Number(process.argv[2]), "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});
