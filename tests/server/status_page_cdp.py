#!/usr/bin/python3
"""tests/server/status_page_cdp.py — drives a headless Chromium over the
DevTools protocol for status_page_test (Debian's chromium-headless-shell
or chromium, and python3-websocket).

    status_page_cdp.py BROWSER WORKDIR

Starts BROWSER with a private profile in WORKDIR, prints "ok ready",
then reads one command per line on stdin and answers one line on stdout,
"ok VALUE" or "fail VALUE" (VALUE: a string as is, newlines shown as
" | "; anything else as JSON):

    open URL               navigate; wait for the document to load
    eval JS                the value of JS
    wait MS JS             evaluate JS until it is truthy (at most MS ms;
                           fail if it never was): its last value
    shot PATH              PNG screenshot of the page to PATH: its bytes
    quit

Every wait is bounded; the browser is killed on exit.
"""
import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import websocket

for k in list(os.environ):  # everything here is on loopback
    if k.lower().endswith("_proxy"):
        del os.environ[k]

browser, workdir = sys.argv[1], sys.argv[2]
profile = os.path.join(workdir, "profile")
os.makedirs(profile, exist_ok=True)
args = [browser, "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--no-default-browser-check", "--no-proxy-server",
        "--disable-background-networking", "--hide-scrollbars",
        "--remote-debugging-port=0", "--remote-allow-origins=*",
        "--user-data-dir=" + profile, "--window-size=1280,720", "about:blank"]
if os.path.basename(browser) == "chromium":
    args.insert(1, "--headless=new")
log = open(os.path.join(workdir, "browser.log"), "ab")
# A process group of its own: /usr/bin/chromium-headless-shell is a shell
# script that runs the browser as its child (no exec), so killing `proc`
# alone left the browser running after every test.
proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log,
                        stderr=log, start_new_session=True)


def stop_browser():
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def answer(ok, value):
    if not isinstance(value, str):
        value = json.dumps(value)
    print(("ok " if ok else "fail ") + value.replace("\n", " | "), flush=True)


def fail(msg):
    answer(False, msg)
    stop_browser()
    sys.exit(1)


port_file = os.path.join(profile, "DevToolsActivePort")
deadline = time.time() + 30
while not os.path.exists(port_file) or os.path.getsize(port_file) == 0:
    if time.time() > deadline or proc.poll() is not None:
        fail("the browser did not open its DevTools port (see browser.log)")
    time.sleep(0.05)
time.sleep(0.05)
port = open(port_file).read().split()[0]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
page = None
while page is None:
    targets = json.load(opener.open("http://127.0.0.1:%s/json/list" % port))
    page = next((t for t in targets if t.get("type") == "page"), None)
    if page is None:
        if time.time() > deadline:
            fail("the browser has no page target")
        time.sleep(0.05)
ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30,
                                 suppress_origin=True)
next_id = 0


def call(method, **params):
    global next_id
    next_id += 1
    ws.send(json.dumps({"id": next_id, "method": method, "params": params}))
    while True:
        msg = json.loads(ws.recv())
        if msg.get("id") == next_id:
            if "error" in msg:
                raise RuntimeError("%s: %s" % (method, msg["error"]))
            return msg["result"]


def evaluate(js):
    r = call("Runtime.evaluate", expression=js, returnByValue=True,
             awaitPromise=True)
    if "exceptionDetails" in r:
        return None
    return r["result"].get("value")


answer(True, "ready")
for line in sys.stdin:
    line = line.rstrip("\n")
    cmd, _, rest = line.partition(" ")
    try:
        if cmd == "open":
            call("Page.navigate", url=rest)
            until = time.time() + 15
            ok = False
            while time.time() < until:
                if evaluate("document.readyState") == "complete":
                    ok = True
                    break
                time.sleep(0.05)
            out = (ok, evaluate("location.href"))
        elif cmd == "eval":
            out = (True, evaluate(rest))
        elif cmd == "wait":
            ms, _, js = rest.partition(" ")
            until = time.time() + int(ms) / 1000.0
            value = evaluate(js)
            while not value and time.time() < until:
                time.sleep(0.05)
                value = evaluate(js)
            out = (bool(value), value)
        elif cmd == "shot":
            data = base64.b64decode(
                call("Page.captureScreenshot", format="png",
                     captureBeyondViewport=True)["data"])
            with open(rest, "wb") as f:
                f.write(data)
            out = (True, len(data))
        elif cmd == "quit":
            break
        else:
            out = (False, "unknown command " + cmd)
    except Exception as e:  # reported to the test, which fails
        out = (False, repr(e))
    answer(*out)
ws.close()
stop_browser()
