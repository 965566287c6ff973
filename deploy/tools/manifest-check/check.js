// Validates Kubernetes manifests (multi-document YAML files) against the
// Kubernetes API schema: the validators kubernetes-models compiles from the
// official OpenAPI definitions (types, formats, enums, required fields), plus
// unknown fields: a field that the object's schema never reads during
// validation is not in the schema, and a strict API server (kubectl's default
// --validate=strict since Kubernetes 1.27) rejects it.
//
//   node check.js FILE...              validate; exit 1 listing every problem
//   node check.js --self-test DIR      every DIR/*.yaml whose first line is
//                                      "# expect: TEXT" must fail with TEXT;
//                                      "# expect: valid" must pass
"use strict";

const fs = require("fs");
const path = require("path");
const yaml = require("js-yaml");

// apiVersion -> the module of the package that models it. kubernetes-models
// 5 is ES modules only (its group-version index modules are imported once at
// start, see loadModels); the prometheus-operator models are CommonJS.
const ESM_PACKAGES = {
  "v1": "kubernetes-models/v1",
  "apps/v1": "kubernetes-models/apps/v1",
  "rbac.authorization.k8s.io/v1": "kubernetes-models/rbac.authorization.k8s.io/v1",
  "resource.k8s.io/v1": "kubernetes-models/resource.k8s.io/v1",
};
const CJS_PACKAGES = {
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
};
const MODULES = {};

async function loadModels() {
  for (const [apiVersion, module] of Object.entries(ESM_PACKAGES)) {
    MODULES[apiVersion] = await import(module);
  }
}

function modelFor(apiVersion, kind) {
  if (!/^[A-Z][A-Za-z]+$/.test(kind || "")) return null;
  if (MODULES[apiVersion]) return MODULES[apiVersion][kind] || null;
  const prefix = CJS_PACKAGES[apiVersion];
  if (!prefix) return null;
  try {
    return require(`${prefix}/${kind}`)[kind] || null;
  } catch (e) {
    return null;
  }
}

// Wraps `value` so that every own property the validator reads is recorded
// in `seen` (a Map from object to the Set of its keys read).
function tracked(value, seen, cache) {
  if (value === null || typeof value !== "object") return value;
  if (cache.has(value)) return cache.get(value);
  const proxy = new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key === "string" && Object.prototype.hasOwnProperty.call(target, key)) {
        if (!seen.has(target)) seen.set(target, new Set());
        seen.get(target).add(key);
        return tracked(target[key], seen, cache);
      }
      return Reflect.get(target, key, receiver);
    },
  });
  cache.set(value, proxy);
  return proxy;
}

// Every key of a plain object in `value` that the validator never read.
function unknownFields(value, seen, where, out) {
  if (Array.isArray(value)) {
    value.forEach((v, i) => unknownFields(v, seen, `${where}/${i}`, out));
  } else if (value !== null && typeof value === "object") {
    const read = seen.get(value) || new Set();
    for (const key of Object.keys(value)) {
      if (!read.has(key)) {
        out.push(`${where}/${key}: unknown field (not in the schema of this object)`);
      } else {
        unknownFields(value[key], seen, `${where}/${key}`, out);
      }
    }
  }
}

// Problems of one parsed document; [] when the API server would accept it.
function checkObject(doc) {
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    return ["not a Kubernetes object (a mapping with apiVersion and kind)"];
  }
  const Model = modelFor(doc.apiVersion, doc.kind);
  if (!Model) return [`unknown apiVersion/kind ${doc.apiVersion}/${doc.kind}`];
  const problems = [];
  if (!doc.metadata || typeof doc.metadata.name !== "string" || doc.metadata.name === "") {
    problems.push("data/metadata/name: required (the API server refuses an object without it)");
  }
  const seen = new Map();
  try {
    Model.prototype.validate.call(tracked(doc, seen, new WeakMap()));
  } catch (e) {
    problems.push(...String(e.message).split("\n").filter((l) => l.trim() !== ""));
  }
  unknownFields(doc, seen, "data", problems);
  return problems;
}

function checkFile(file) {
  let docs;
  try {
    docs = yaml.loadAll(fs.readFileSync(file, "utf8")).filter((d) => d !== null && d !== undefined);
  } catch (e) {
    return [`${file}: not valid YAML: ${e.message}`];
  }
  if (docs.length === 0) return [`${file}: no YAML document`];
  const problems = [];
  docs.forEach((doc, i) => {
    const name = doc && doc.kind ? `${doc.kind}/${doc.metadata && doc.metadata.name}` : `#${i}`;
    for (const p of checkObject(doc)) problems.push(`${file}: document ${i} (${name}): ${p}`);
  });
  return problems;
}

function selfTest(dir) {
  const failures = [];
  const files = fs.readdirSync(dir).filter((f) => f.endsWith(".yaml")).sort();
  for (const f of files) {
    const file = path.join(dir, f);
    const first = fs.readFileSync(file, "utf8").split("\n")[0];
    const m = /^# expect: (.+)$/.exec(first);
    if (!m) {
      failures.push(`${file}: first line must be "# expect: TEXT" or "# expect: valid"`);
      continue;
    }
    const problems = checkFile(file);
    if (m[1] === "valid") {
      if (problems.length) failures.push(`${file}: expected valid, got:\n  ${problems.join("\n  ")}`);
    } else if (!problems.some((p) => p.includes(m[1]))) {
      failures.push(`${file}: expected a problem containing "${m[1]}", got: ${problems.join("; ") || "none"}`);
    }
  }
  if (files.length === 0) failures.push(`${dir}: no *.yaml cases`);
  return { failures, count: files.length };
}

function main(argv) {
  if (argv[0] === "--self-test") {
    const { failures, count } = selfTest(argv[1]);
    if (failures.length) {
      console.error(failures.join("\n"));
      return 1;
    }
    console.log(`manifest-check self-test: ${count} cases as expected`);
    return 0;
  }
  let problems = [];
  let objects = 0;
  for (const file of argv) {
    problems = problems.concat(checkFile(file));
    objects += yaml.loadAll(fs.readFileSync(file, "utf8")).filter((d) => d).length;
  }
  if (problems.length) {
    console.error(problems.join("\n"));
    return 1;
  }
  console.log(`${objects} objects valid against the Kubernetes API schema`);
  return 0;
}

loadModels().then(
  () => {
    process.exitCode = main(process.argv.slice(2));
  },
  (e) => {
    console.error(`manifest-check: cannot load the Kubernetes models: ${e.message}`);
    process.exitCode = 2;
  });
