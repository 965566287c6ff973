#!/usr/bin/env python3
"""Checks every thread-safety annotation of migd with clang's -Wthread-safety.

The clang tree CI builds (build-fuzz: clang 14, `fuzz` preset) compiles only
what the fuzz targets and the ASan unit tests need. Every other translation
unit of migd that can see an annotation -- it includes src/base/mutex.h
through the project's own headers, or spells an ABSL_ thread-safety
attribute itself -- is compiled here with its own compile command from
compile_commands.json and -fsyntax-only: parsing and the analysis, no code
generation, no sanitizer instrumentation. A translation unit whose object in
the tree is newer than its sources was compiled with the same flags
(-Wthread-safety -Werror, cmake/migd.cmake) and is not compiled again.

  scripts/thread_safety_check.py BUILD_DIR [--jobs N] [--all]

First a self-test: with the tree's own flags, a class that writes an
ABSL_GUARDED_BY member without its lock must fail to compile and the same
class taking a MutexLock must compile, so the check cannot pass because the
analysis is off. --all checks every translation unit of the project (to
measure the filter). Exit status 1 if the self-test or any translation unit
fails, with the compiler's output.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OWN_DIRS = ("src", "tests", "bench", "fuzz")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
ANNOTATION = re.compile(
    r"\bABSL_(GUARDED_BY|PT_GUARDED_BY|EXCLUSIVE_LOCKS_REQUIRED|SHARED_LOCKS_REQUIRED|"
    r"LOCKS_EXCLUDED|ACQUIRED_(BEFORE|AFTER)|LOCKABLE|SCOPED_LOCKABLE|"
    r"EXCLUSIVE_LOCK_FUNCTION|UNLOCK_FUNCTION|ASSERT_EXCLUSIVE_LOCK|NO_THREAD_SAFETY_ANALYSIS)\b")
MUTEX_HEADER = os.path.join(ROOT, "src", "base", "mutex.h")


class Sources:
    """The project's own files, their quoted includes and annotations."""

    def __init__(self, include_dirs):
        self.include_dirs = include_dirs
        self.cache = {}

    def resolve(self, name, including):
        for d in [os.path.dirname(including)] + self.include_dirs:
            path = os.path.normpath(os.path.join(d, name))
            if os.path.isfile(path) and path.startswith(ROOT + os.sep):
                return path
        return None

    def info(self, path):
        """(includes, sees an annotation itself) of one file."""
        if path not in self.cache:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            includes = [p for p in (self.resolve(n, path) for n in INCLUDE.findall(text)) if p]
            self.cache[path] = (includes, bool(ANNOTATION.search(text)))
        return self.cache[path]

    def closure(self, path):
        seen, stack = set(), [path]
        while stack:
            p = stack.pop()
            if p in seen:
                continue
            seen.add(p)
            stack.extend(self.info(p)[0])
        return seen

    def sees_annotations(self, path):
        files = self.closure(path)
        return MUTEX_HEADER in files or any(self.info(p)[1] for p in files)


def own(path):
    rel = os.path.relpath(path, ROOT)
    return rel.split(os.sep)[0] in OWN_DIRS


def syntax_only(argv):
    """The compile command with -fsyntax-only instead of an object file."""
    out, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if arg in ("-MD", "-MMD"):
            continue
        out.append(arg)
    return out + ["-fsyntax-only"]


def object_of(argv, directory):
    for i, arg in enumerate(argv[:-1]):
        if arg == "-o":
            return os.path.join(directory, argv[i + 1])
    return None


def dirty_objects(build_dir, objects):
    """The objects ninja would (re)build now: missing, older than a source or
    header, or built with another command."""
    if not objects:
        return set()
    result = subprocess.run(["ninja", "-C", build_dir, "-n", "-v"] +
                            [os.path.relpath(o, build_dir) for o in objects],
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("thread_safety_check: ninja -n failed:\n" + result.stdout + result.stderr)
    dirty = set()
    for line in result.stdout.splitlines():
        m = re.search(r" -o (\S+\.o) ", line)
        if m:
            dirty.add(os.path.normpath(os.path.join(build_dir, m.group(1))))
    return dirty


SELF_TEST = """#include "base/mutex.h"
namespace {
class Counter {
 public:
  void Add() { %s total_ += 1; }
 private:
  migd::Mutex mu_;
  int total_ ABSL_GUARDED_BY(mu_) = 0;
};
}  // namespace
int UseCounter();
int UseCounter() { Counter c; c.Add(); return 0; }
"""


def self_test(entry):
    """None if the analysis rejects an unguarded write and accepts a guarded one."""
    argv = syntax_only(shlex.split(entry["command"]))
    source = os.path.normpath(entry["file"])
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = []
        for name, lock in (("bad", ""), ("good", "migd::MutexLock l(&mu_);")):
            path = os.path.join(tmp, name + ".cc")
            with open(path, "w") as f:
                f.write(SELF_TEST % lock)
            cmd = [path if os.path.normpath(a) == source else a for a in argv]
            r = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
            outcomes.append((r.returncode, r.stdout + r.stderr))
    (bad_rc, bad_out), (good_rc, good_out) = outcomes
    if bad_rc == 0 or "requires holding mutex" not in bad_out:
        return "an unguarded write compiled (is -Wthread-safety -Werror on?):\n" + bad_out
    if good_rc != 0:
        return "a guarded write did not compile:\n" + good_out
    return None


def check(entry):
    argv = shlex.split(entry["command"])
    result = subprocess.run(syntax_only(argv), cwd=entry["directory"], capture_output=True,
                            text=True)
    return entry["file"], result.returncode, result.stdout + result.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--all", action="store_true")
    args = parser.parse_args()
    with open(os.path.join(args.build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    if not any("clang" in os.path.basename(shlex.split(e["command"])[0]) for e in entries[:1]):
        sys.exit("thread_safety_check: %s is not a clang tree (configure it with the fuzz preset)"
                 % args.build_dir)
    sources = Sources([os.path.join(ROOT, "src"), ROOT])
    selected = []
    for e in entries:
        path = os.path.normpath(e["file"])
        if not path.startswith(ROOT + os.sep) or not own(path):
            continue
        if args.all or sources.sees_annotations(path):
            selected.append(e)
    # An object ninja considers up to date was compiled with this tree's
    # command (-Wthread-safety -Werror) from these sources: already checked.
    objects = {id(e): object_of(shlex.split(e["command"]), e["directory"]) for e in selected}
    dirty = set() if args.all else dirty_objects(
        args.build_dir, [o for o in objects.values() if o and os.path.exists(o)])
    todo = [e for e in selected
            if args.all or not objects[id(e)] or not os.path.exists(objects[id(e)]) or
            os.path.normpath(objects[id(e)]) in dirty]
    seen, skipped = len(selected), len(selected) - len(todo)
    mutex_users = [e for e in selected if MUTEX_HEADER in sources.closure(os.path.normpath(e["file"]))]
    if not mutex_users:
        sys.exit("thread_safety_check: no translation unit includes src/base/mutex.h")
    problem = self_test(mutex_users[0])
    if problem:
        print("thread_safety_check: self-test FAILED: " + problem)
        return 1
    print("thread_safety_check: self-test ok (an unguarded write is a compile error)")
    start = time.monotonic()
    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for path, rc, output in pool.map(check, todo):
            if rc != 0:
                failed.append(path)
                sys.stdout.write(output)
    print("thread_safety_check: %d translation units see thread-safety annotations; %d were "
          "compiled in %s already, %d checked with -fsyntax-only in %.0f s"
          % (seen, skipped, args.build_dir, len(todo), time.monotonic() - start))
    if failed:
        print("thread_safety_check: FAILED in %d: %s" % (len(failed), " ".join(
            os.path.relpath(p, ROOT) for p in failed)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
