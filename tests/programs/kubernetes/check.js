// check.js - each YAML file given, every document of it, validated against
// Kubernetes' own schema for its apiVersion and kind (the kubernetes-models
// package, generated from the Kubernetes OpenAPI); prints "ok KIND NAME"
// per document, or the errors and exits 1.
//
//     node check.js FILE.yaml...
'use strict';
const fs = require('fs');
const yaml = require('js-yaml');

const KINDS = {
  'apps/v1': { DaemonSet: 'kubernetes-models/apps/v1' },
  v1: { ServiceAccount: 'kubernetes-models/v1', Service: 'kubernetes-models/v1' },
};

let failed = false;
for (const file of process.argv.slice(2)) {
  for (const doc of yaml.loadAll(fs.readFileSync(file, 'utf8'))) {
    if (doc === null) continue;
    const where = (KINDS[doc.apiVersion] || {})[doc.kind];
    if (!where) {
      console.log(`${file}: no schema here for ${doc.apiVersion} ${doc.kind}`);
      failed = true;
      continue;
    }
    const Model = require(where)[doc.kind];
    try {
      new Model(doc).validate();
      console.log(`ok ${doc.kind} ${doc.metadata && doc.metadata.name}`);
    } catch (e) {
      console.log(`${file}: ${doc.kind} ${doc.metadata && doc.metadata.name}: ${e.message}`);
      failed = true;
    }
  }
}
process.exit(failed ? 1 : 0);
