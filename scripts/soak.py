#!/usr/bin/env python3
"""Fault soak (docs/RELIABILITY.md): SIGKILL a download at seeded random moments over a lossy link, resume each time,
and prove the end result whole.

An asset of three renditions (video, English and French audio) made by ffmpeg is packaged with SAMPLE-AES by
`stowage package`, its keys held by `stowage keyserver run`, and served by `stowage origin --profile lossy` (2 MB/s,
5% errors, 5% resets, 5% truncations). Then, until --kills kills have landed on a running process:

- cli mode: `stowage download` (then `stowage resume`) is started and SIGKILLed after a random delay;
- service mode: `stowage service run` is started (the first time, `stowage download --background` queues the asset)
  and the service is SIGKILLed after a random delay, with the download inside it.

A download that completes before its kill is checked and deleted, and the next cycle starts from scratch. At the end
the download is run to completion and checked: every file of the manifest equals the origin's byte for byte, every
SQLite file of the data directory passes `PRAGMA integrity_check`, `stowage keys audit --verify` passes, and
`stowage verify ASSET --deep` is clean. Prints a Markdown table and one JSON line; exits 1 when a check fails.

Usage: soak.py [--kills N] [--mode cli|service] [--seed S] [--stowage PATH] [--work DIR] [--keep]
"""

import argparse, glob, json, os, random, shutil, signal, sqlite3, subprocess, sys, tempfile, time

ASSET = "soak-1"


def log(message):
    print(message, file=sys.stderr, flush=True)


class Failure(Exception):
    pass


def run(command, env=None, timeout=300, check=True):
    result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=timeout)
    if check and result.returncode != 0:
        raise Failure(f"{' '.join(command[:3])} exited {result.returncode}: {result.stderr.strip() or result.stdout.strip()}")
    return result


def start_server(command, log_path, env=None):
    """Starts a server that prints 'listening on URL' and returns (process, URL); bounded wait of 60 s."""
    handle = open(log_path, "w")
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=handle, text=True,
                               env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    line = ""
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith("listening on ") or process.poll() is not None:
            break
    if not line.startswith("listening on "):
        process.kill()
        raise Failure(f"{command[1]} did not start: {line.strip()!r} (log: {log_path})")
    return process, line[len("listening on "):].strip()


def stop(process):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def make_asset(stowage, work):
    clear = os.path.join(work, "clear")
    os.makedirs(clear, exist_ok=True)
    # Noise keeps the video near its bitrate (about 15 MB in all), so a download over 2 MB/s lasts long enough for
    # kills to land in it.
    run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25,noise=alls=30:allf=t",
         "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-f", "lavfi", "-i", "sine=frequency=660:sample_rate=48000",
         "-t", "48", "-map", "0:v", "-map", "1:a", "-map", "2:a", "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "2M",
         "-maxrate", "2M", "-bufsize", "2M", "-g", "50", "-keyint_min", "50", "-sc_threshold", "0", "-c:a", "aac", "-b:a", "64k",
         "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod", "-hls_segment_filename", clear + "/stream_%v/seg_%d.ts",
         "-master_pl_name", "master.m3u8", "-var_stream_map",
         "v:0,agroup:aud a:0,agroup:aud,language:en,name:en,default:yes a:1,agroup:aud,language:fr,name:fr",
         clear + "/stream_%v/index.m3u8"], timeout=600)
    keyserver = os.path.join(work, "keyserver")
    run([stowage, "keyserver", "init", "--data-dir", keyserver])
    origin = os.path.join(work, "origin")
    run([stowage, "package", os.path.join(clear, "master.m3u8"), "--asset-id", ASSET, "--method", "sample-aes",
         "--out", os.path.join(origin, ASSET), "--keyserver-data-dir", keyserver])
    token = run([stowage, "keyserver", "token", "--sub", "soak", "--asset", ASSET, "--data-dir", keyserver]).stdout.strip()
    return keyserver, origin, token


def check_package(stowage, env, home, origin):
    """Every check of a finished download; raises Failure naming the first that fails."""
    package = os.path.join(home, "packages", ASSET)
    with open(os.path.join(package, "manifest.json")) as handle:
        manifest = json.load(handle)
    files = [section for rendition in manifest["renditions"] for section in rendition.get("initSections", [])]
    files += [segment["file"] for rendition in manifest["renditions"] for segment in rendition["segments"] if segment.get("file")]
    if not files:
        raise Failure("the manifest lists no file")
    renditions = sorted(rendition["id"] for rendition in manifest["renditions"])
    if len(renditions) < 3:
        raise Failure(f"only renditions {renditions} were downloaded, expected video and two audio")
    for file in files:
        source = os.path.join(origin, file["sourceURL"].split("://", 1)[1].split("/", 1)[1])
        with open(os.path.join(package, file["path"]), "rb") as local, open(source, "rb") as served:
            if local.read() != served.read():
                raise Failure(f"{file['path']} differs from the origin's {source}")
    databases = glob.glob(os.path.join(home, "*.sqlite"))
    if not databases:
        raise Failure(f"no SQLite file in {home}")
    for path in databases:
        connection = sqlite3.connect(path)
        try:
            answer = connection.execute("PRAGMA integrity_check").fetchall()
        finally:
            connection.close()
        if answer != [("ok",)]:
            raise Failure(f"PRAGMA integrity_check of {os.path.basename(path)}: {answer[:3]}")
    run([stowage, "keys", "audit", "--verify"], env=env)
    verify = run([stowage, "verify", ASSET, "--deep"], env=env, check=False)
    if verify.returncode != 0:
        raise Failure(f"verify --deep exited {verify.returncode}: {verify.stdout.strip()} {verify.stderr.strip()}")
    return len(files), len(databases)


def wait_for_service(stowage, env, process):
    """Waits (at most 60 s) until `stowage service status` says the service started by `process` runs."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if run([stowage, "service", "status"], env=env, check=False, timeout=60).returncode == 0:
            return
        time.sleep(0.1)
    raise Failure(f"the service did not start (status {process.poll()})")


def download_state(stowage, env):
    """The asset's download state as `stowage list --json` gives it (completed, failed, downloading, ...), or None."""
    result = run([stowage, "list", "--json"], env=env, check=False, timeout=60)
    if result.returncode != 0:
        return None
    try:
        return next((entry.get("download") for entry in json.loads(result.stdout) if entry.get("assetId") == ASSET), None)
    except (json.JSONDecodeError, AttributeError):
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--mode", choices=["cli", "service"], default="cli")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stowage", default=os.environ.get("STOWAGE_BIN", "stowage"))
    parser.add_argument("--work")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    stowage = os.path.abspath(args.stowage) if os.sep in args.stowage else shutil.which(args.stowage)
    if not stowage or not os.access(stowage, os.X_OK):
        sys.exit(f"error: no stowage executable at {args.stowage}; pass --stowage PATH or set STOWAGE_BIN")
    work = args.work or tempfile.mkdtemp(prefix="stowage-soak-")
    os.makedirs(work, exist_ok=True)
    home = os.path.join(work, "home")
    env = dict(os.environ, STOWAGE_HOME=home)
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        env.pop(name, None)
    chooser = random.Random(args.seed)
    servers = []
    started = time.monotonic()
    outcome = {"mode": args.mode, "seed": args.seed, "killsAsked": args.kills, "kills": 0, "completedBeforeKill": 0,
               "cycles": 1, "files": 0, "ok": False}
    try:
        log(f"soak: making the asset in {work}")
        keyserver, origin, token = make_asset(stowage, work)
        ks, key_url = start_server([stowage, "keyserver", "run", "--data-dir", keyserver, "--port", "0"], os.path.join(work, "keyserver.log"))
        servers.append(ks)
        og, origin_url = start_server([stowage, "origin", origin, "--port", "0", "--profile", "lossy", "--seed", str(args.seed)],
                                      os.path.join(work, "origin.log"))
        servers.append(og)
        url = f"{origin_url}/{ASSET}/master.m3u8"
        # No --asset-id: the ID comes from the playlist's skd keys, read through the lossy link with retries (a read
        # that failed once fell back silently on an ID made from the URL).
        download = [stowage, "download", url, "--key-server", key_url, "--audio", "all"]
        # The token as a user passes it: in the environment, never on the command line (where `stowage` refuses it).
        env["STOWAGE_TOKEN"] = token
        fresh = True
        # Delays fit a download's length: a first guess of 12 s, shortened by each run that completes before its kill.
        span = 12.0
        attempts = 0
        while outcome["kills"] < args.kills:
            attempts += 1
            if attempts > args.kills * 6 + 20:
                raise Failure(f"only {outcome['kills']} kills landed in {attempts} attempts")
            delay = chooser.uniform(0.05, span)
            log_path = os.path.join(work, f"run-{attempts}.log")
            with open(log_path, "w") as handle:
                if args.mode == "cli":
                    command = download if fresh else [stowage, "resume", ASSET]
                    process = subprocess.Popen(command + ["--json"], stdin=subprocess.DEVNULL, stdout=handle, stderr=handle,
                                               env=env, start_new_session=True)
                else:
                    process = subprocess.Popen([stowage, "service", "run"], stdin=subprocess.DEVNULL, stdout=handle,
                                               stderr=handle, env=env, start_new_session=True)
                    if fresh:
                        wait_for_service(stowage, env, process)
                        run(download + ["--background"], env=env, timeout=60)
                was_fresh, fresh = fresh, False
                began = time.monotonic()
                try:
                    process.wait(timeout=delay)
                    ended_alone = True
                except subprocess.TimeoutExpired:
                    ended_alone = False
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            if not ended_alone and download_state(stowage, env) == "completed":
                # The download was finished (and recorded) before the kill landed, the CLI or the service only not yet
                # exited: check it, start over, aim sooner.
                outcome["completedBeforeKill"] += 1
                check_package(stowage, env, home, origin)
                span = max(0.5, span * 0.7)
                run([stowage, "delete", ASSET], env=env)
                outcome["cycles"] += 1
                fresh = True
                continue
            if not ended_alone:
                outcome["kills"] += 1
                continue
            if args.mode == "service":
                raise Failure(f"the service exited by itself with status {process.returncode} (log: {log_path})")
            if process.returncode != 0:
                with open(log_path) as handle:
                    tail = handle.read()[-2000:]
                if not was_fresh and '"code":"download_not_found"' in tail.replace(" ", ""):
                    # The last kill came before the download was recorded (while the asset ID was still being read
                    # from the playlists): nothing was kept, so there is nothing to resume, and it starts again.
                    outcome["killedBeforeRecorded"] = outcome.get("killedBeforeRecorded", 0) + 1
                    fresh = True
                    continue
                raise Failure(f"a run exited with status {process.returncode} before its kill (log: {log_path}): {tail}")
            # Completed before the kill: check it, start over, and aim within the time a whole run took.
            outcome["completedBeforeKill"] += 1
            check_package(stowage, env, home, origin)
            if was_fresh:
                span = max(0.5, min(span, (time.monotonic() - began) * 0.9))
            run([stowage, "delete", ASSET], env=env)
            outcome["cycles"] += 1
            fresh = True
        log(f"soak: {outcome['kills']} kills landed; finishing the download")
        if args.mode == "cli":
            finish = run((download if fresh else [stowage, "resume", ASSET]) + ["--json"], env=env, timeout=900, check=False)
            if finish.returncode != 0:
                raise Failure(f"the final run exited {finish.returncode}: {finish.stdout[-2000:]} {finish.stderr[-2000:]}")
        else:
            with open(os.path.join(work, "service-final.log"), "w") as handle:
                service = subprocess.Popen([stowage, "service", "run"], stdin=subprocess.DEVNULL, stdout=handle, stderr=handle,
                                           env=env, start_new_session=True)
            try:
                if fresh:
                    wait_for_service(stowage, env, service)
                    run(download + ["--background"], env=env, timeout=60)
                deadline = time.monotonic() + 900
                state = None
                while time.monotonic() < deadline:
                    state = download_state(stowage, env)
                    if state in ("completed", "failed", "cancelled"):
                        break
                    time.sleep(1)
                if state != "completed":
                    raise Failure(f"the service left {ASSET} {state or 'unknown'} after the last kill")
            finally:
                stop(service)
        outcome["files"], outcome["databases"] = check_package(stowage, env, home, origin)
        outcome["ok"] = True
    except Failure as failure:
        outcome["failure"] = str(failure)
    finally:
        for server in servers:
            stop(server)
        outcome["seconds"] = round(time.monotonic() - started, 1)
        if args.keep or not outcome["ok"]:
            log(f"soak: work kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print("| mode | seed | kills landed | completed before a kill | files checked | result | seconds |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    result = "byte-identical, integrity_check ok, audit chain ok, verify --deep clean" if outcome["ok"] else f"FAILED: {outcome['failure']}"
    print(f"| {outcome['mode']} | {outcome['seed']} | {outcome['kills']} | {outcome['completedBeforeKill']} | {outcome['files']} | {result} | {outcome['seconds']} |")
    print(json.dumps(outcome, sort_keys=True))
    sys.exit(0 if outcome["ok"] else 1)


if __name__ == "__main__":
    main()
