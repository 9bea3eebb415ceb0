#!/usr/bin/env python3
"""Load generator for the key server: POST /v1/keys requests per second and latency percentiles on loopback.

What it needs: Python 3 with the `cryptography` package, a running key server (Benchmarks/key-server.sh starts one)
and its data directory (the entitlement tokens are signed with its `token-secret` and name its `tokenAudience`, as the service that sells the
content would sign them).

Every request is built and signed before the clock starts: each simulated device has its own Ed25519 and X25519
key pairs and its own account (so the device limit never refuses it), and each body carries a fresh 16-byte nonce.
The requests are then sent over `--concurrency` keep-alive HTTP/1.1 connections, one request in flight per
connection; latency is measured per request from the first byte written to the last byte read. A warm-up round
registers every device first. One response is verified (server signature, then unwrap with the device's X25519 key)
so the benchmark measures real work.

Prints one JSON object: requests, seconds, requests_per_second, latency_ms {p50, p90, p99, max}, statuses.
"""
import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import os
import ssl
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

RAW = (serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def b64(data):
    return base64.b64encode(data).decode()


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256_token(secret, audience, subject, assets, ttl):
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    now = int(time.time())
    claims = b64url(json.dumps({"sub": subject, "assets": assets, "iat": now, "exp": now + ttl, "aud": audience}).encode())
    signing_input = f"{header}.{claims}".encode()
    return f"{header}.{claims}.{b64url(hmac.new(secret, signing_input, hashlib.sha256).digest())}"


class Device:
    def __init__(self, index, secret, audience, asset):
        self.signing = Ed25519PrivateKey.generate()
        self.agreement = X25519PrivateKey.generate()
        signing_public = self.signing.public_key().public_bytes(*RAW)
        agreement_public = self.agreement.public_key().public_bytes(*RAW)
        # docs/key-protocol.md, "Device identity".
        self.id = hashlib.sha256(signing_public + agreement_public).digest()[:16].hex()
        self.info = {"id": self.id, "signingKey": b64(signing_public), "agreementKey": b64(agreement_public)}
        self.token = hs256_token(secret, audience, f"bench-account-{index}", [asset], 3600)

    def request(self, host, asset, key_ids):
        body = json.dumps({
            "version": 1, "assetId": asset, "keyIds": key_ids, "lease": "persistent",
            "nonce": b64(os.urandom(16)), "clientTime": int(time.time()), "device": self.info,
        }, separators=(",", ":")).encode()
        head = (
            f"POST /v1/keys HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {self.token}\r\nStowage-Device-Signature: {b64(self.signing.sign(body))}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        return head + body


async def read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return status, body


TLS = None  # an ssl.SSLContext for https URLs


async def connect(host, port):
    return await asyncio.open_connection(host, port, ssl=TLS)


async def run_connection(host, port, requests, latencies, statuses, keep_body):
    reader, writer = await connect(host, port)
    body = None
    for request in requests:
        start = time.perf_counter()
        writer.write(request)
        status, body = await read_response(reader)
        latencies.append(time.perf_counter() - start)
        statuses[status] = statuses.get(status, 0) + 1
        if keep_body is not None and status == 200 and not keep_body:
            keep_body.append(body)
    writer.close()
    await writer.wait_closed()


async def send_all(host, port, requests, concurrency, keep_body=None):
    latencies, statuses = [], {}
    shares = [requests[index::concurrency] for index in range(concurrency)]
    start = time.perf_counter()
    await asyncio.gather(*(run_connection(host, port, share, latencies, statuses, keep_body) for share in shares if share))
    return time.perf_counter() - start, latencies, statuses


def verify_sample(body, server_key, device, key_id, expected_key):
    signed = json.loads(body)
    payload_bytes = base64.b64decode(signed["payload"], validate=True)
    Ed25519PublicKey.from_public_bytes(server_key).verify(base64.b64decode(signed["signature"]), payload_bytes)
    payload = json.loads(payload_bytes)
    wrapped = payload["keys"][0]
    shared = device.agreement.exchange(X25519PublicKey.from_public_bytes(base64.b64decode(wrapped["ephemeralKey"])))
    kek = HKDF(hashes.SHA256(), 32, payload["lease"]["leaseId"].encode(),
               b"stowage-skdp-v1" + bytes.fromhex(key_id) + device.id.encode()).derive(shared)
    key = AESGCM(kek).decrypt(base64.b64decode(wrapped["nonce"]), base64.b64decode(wrapped["wrappedKey"]), bytes.fromhex(key_id))
    if expected_key is not None and key != bytes.fromhex(expected_key):
        raise SystemExit("the unwrapped key is not the registered content key")


def percentile(sorted_values, fraction):
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the key server's base URL, http(s)://127.0.0.1:PORT")
    parser.add_argument("--ca-file", help="the CA that signed an https server's certificate")
    parser.add_argument("--data-dir", required=True, help="its data directory (for token-secret)")
    parser.add_argument("--asset", required=True)
    parser.add_argument("--key-id", required=True)
    parser.add_argument("--key", help="the content key (hex), to check the sample unwrap")
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--devices", type=int, default=64)
    args = parser.parse_args()

    global TLS
    if args.url.startswith("https://"):
        TLS = ssl.create_default_context(cafile=args.ca_file)
    host, port = args.url.removeprefix("https://").removeprefix("http://").rstrip("/").split(":")
    port = int(port)
    with open(os.path.join(args.data_dir, "token-secret"), "rb") as file:
        secret = file.read()
    # Tokens name this key server in `aud` (config.json's tokenAudience).
    with open(os.path.join(args.data_dir, "config.json")) as file:
        audience = json.load(file)["tokenAudience"]
    devices = [Device(index, secret, audience, args.asset) for index in range(args.devices)]
    warmup = [device.request(f"{host}:{port}", args.asset, [args.key_id]) for device in devices]
    requests = [devices[index % len(devices)].request(f"{host}:{port}", args.asset, [args.key_id]) for index in range(args.requests)]

    async def scenario():
        sample = []
        _, _, warm_statuses = await send_all(host, port, warmup, min(args.concurrency, len(warmup)), keep_body=sample)
        if warm_statuses.get(200) != len(warmup):
            raise SystemExit(f"warm-up failed: {warm_statuses}")
        reader, writer = await connect(host, port)
        writer.write(f"GET /v1/server-key HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        _, body = await read_response(reader)
        writer.close()
        server_key = base64.b64decode(json.loads(body)["signingKey"])
        return await send_all(host, port, requests, args.concurrency), server_key, sample

    (seconds, latencies, statuses), server_key, sample = asyncio.run(scenario())
    # The sample came from the warm-up; find its device by the lease's deviceId and check it end to end.
    payload = json.loads(base64.b64decode(json.loads(sample[0])["payload"]))
    device = next(device for device in devices if device.id == payload["lease"]["deviceId"])
    verify_sample(sample[0], server_key, device, args.key_id, args.key)

    latencies.sort()
    print(json.dumps({
        "requests": len(latencies),
        "concurrency": args.concurrency,
        "devices": args.devices,
        "seconds": round(seconds, 3),
        "requests_per_second": round(len(latencies) / seconds, 1),
        "latency_ms": {name: round(1000 * percentile(latencies, fraction), 2)
                       for name, fraction in (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("max", 1.0))},
        "statuses": {str(code): count for code, count in sorted(statuses.items())},
        "sample_verified": True,
    }, indent=2))
    if statuses.get(200) != len(latencies):
        raise SystemExit("some requests failed")


if __name__ == "__main__":
    main()
