#!/usr/bin/env bash
# nginx-live.sh DIR
#
# Live HLS source written by nginx-rtmp (Debian libnginx-mod-rtmp), fed over
# RTMP by `ffmpeg -re`, AES-128 with key rotation (hls_keys on;
# hls_fragments_per_key N), served by the same nginx over HTTP on 127.0.0.1.
#
# stdout: exactly one line, the playlist URL, printed once the playlist exists.
# SIGTERM/SIGINT: stops the publisher and nginx (children only), exits 0.
# SIGUSR1: stop only the publisher (nginx keeps serving; note nginx-rtmp
# never writes EXT-X-ENDLIST - the playlist just stops changing and
# hls_cleanup deletes playlist, fragments and keys some 30-40 s later).
#
# Layout (everything under DIR):
#   nginx.conf, logs/{error,access}.log, logs/nginx.pid, tmp/   nginx prefix
#   www/hls/stream.m3u8 www/hls/stream-N.ts   served, encrypted, sliding
#   www/keys/stream-K.key                     served keys (K = first fragment
#                                             number using the key, IV = K)
#   clear/stream.m3u8 clear/stream-N.ts       oracle: a second nginx-rtmp
#                                             application fed the *same* RTMP
#                                             packets (ffmpeg tee), no keys, no
#                                             cleanup => decrypt(www/hls/X)==clear/X
#   ports ("RTMP_PORT HTTP_PORT"), publisher.log
#
# Environment knobs (defaults):
#   FRAGMENT=2 PLAYLIST_LENGTH=8     hls_fragment / hls_playlist_length (s)
#   FRAGMENTS_PER_KEY=2              hls_fragments_per_key (0 = one key forever)
#   ENCRYPT=1                        0 = hls_keys off
#   KEY_URI=relative                 relative: URI="../keys/stream-K.key";
#                                    absolute: URI="http://127.0.0.1:PORT/keys/.."
#   CLEAR_COPY=1                     0 = publish only the encrypted app
#   DURATION=600                     publisher -t (hard bound)
#   STARTUP_TIMEOUT=30
set -u

DIR=${1:?usage: nginx-live.sh DIR}
FRAGMENT=${FRAGMENT:-2}
PLAYLIST_LENGTH=${PLAYLIST_LENGTH:-8}
FRAGMENTS_PER_KEY=${FRAGMENTS_PER_KEY:-2}
ENCRYPT=${ENCRYPT:-1}
KEY_URI=${KEY_URI:-relative}
CLEAR_COPY=${CLEAR_COPY:-1}
DURATION=${DURATION:-600}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-30}
MODULE=${NGINX_RTMP_MODULE:-/usr/lib/nginx/modules/ngx_rtmp_module.so}

log() { echo "nginx-live: $*" >&2; }

[ -f "$MODULE" ] || { log "missing $MODULE (apt-get install libnginx-mod-rtmp)"; exit 2; }
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
mkdir -p "$DIR/logs" "$DIR/tmp" "$DIR/www/hls" "$DIR/www/keys" "$DIR/clear"

NGINX_PID= PUB_PID=
stop_publisher() {
  if [ -n "$PUB_PID" ] && kill -0 "$PUB_PID" 2>/dev/null; then
    kill -INT "$PUB_PID" 2>/dev/null
    for _ in $(seq 30); do kill -0 "$PUB_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PUB_PID" 2>/dev/null
  fi
}
cleanup() {
  trap - TERM INT USR1
  stop_publisher
  if [ -n "$NGINX_PID" ] && kill -0 "$NGINX_PID" 2>/dev/null; then
    kill -TERM "$NGINX_PID" 2>/dev/null          # fast shutdown; workers follow
    for _ in $(seq 50); do kill -0 "$NGINX_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$NGINX_PID" 2>/dev/null
  fi
  wait 2>/dev/null
}
trap 'log stopping; cleanup; exit 0' TERM INT
trap 'log "SIGUSR1: stopping publisher, nginx keeps serving"; stop_publisher' USR1

free_port() {  # OS picks a free port; racy by nature, hence the retry loop below
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
port_open() { python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5).close()' "$1" 2>/dev/null; }

write_conf() {
  local user_line="" keys="" key_url
  # As root the workers would run as "nobody" and could not write to DIR;
  # run them as the invoking user.  As non-root the directive must be absent.
  [ "$(id -u)" = 0 ] && user_line="user $(id -un) $(id -gn);"
  if [ "$KEY_URI" = absolute ]; then key_url=http://127.0.0.1:$HTTP_PORT/keys/; else key_url=../keys/; fi
  if [ "$ENCRYPT" = 1 ]; then
    keys="hls_keys on;
      hls_key_path $DIR/www/keys;
      hls_key_url $key_url;
      hls_fragments_per_key $FRAGMENTS_PER_KEY;"
  fi
  cat > "$DIR/nginx.conf" <<EOF
load_module $MODULE;
daemon off;
master_process on;
worker_processes 1;
$user_line
pid $DIR/logs/nginx.pid;
error_log $DIR/logs/error.log info;
events { worker_connections 256; }
rtmp {
  access_log $DIR/logs/rtmp-access.log;   # default is /var/log/nginx/access.log
  server {
    listen 127.0.0.1:$RTMP_PORT;
    application live {
      live on;
      record off;
      hls on;
      hls_path $DIR/www/hls;
      hls_fragment ${FRAGMENT}s;
      hls_playlist_length ${PLAYLIST_LENGTH}s;
      $keys
    }
    application clear {
      live on;
      record off;
      hls on;
      hls_path $DIR/clear;
      hls_fragment ${FRAGMENT}s;
      hls_playlist_length 86400s;
      hls_cleanup off;
    }
  }
}
http {
  access_log $DIR/logs/access.log;
  client_body_temp_path $DIR/tmp/body;
  proxy_temp_path $DIR/tmp/proxy;
  fastcgi_temp_path $DIR/tmp/fastcgi;
  uwsgi_temp_path $DIR/tmp/uwsgi;
  scgi_temp_path $DIR/tmp/scgi;
  types {
    application/vnd.apple.mpegurl m3u8;
    video/mp2t ts;
    application/octet-stream key;
  }
  server {
    listen 127.0.0.1:$HTTP_PORT;
    root $DIR/www;
    add_header Cache-Control no-cache;
  }
}
EOF
}

# --- start nginx on two free ports, retrying if we lost a port race ----------
for attempt in 1 2 3 4 5; do
  RTMP_PORT=$(free_port); HTTP_PORT=$(free_port)
  [ "$RTMP_PORT" = "$HTTP_PORT" ] && continue
  write_conf
  nginx -e "$DIR/logs/error.log" -p "$DIR" -c "$DIR/nginx.conf" > "$DIR/logs/nginx.out" 2>&1 &
  NGINX_PID=$!
  up=
  for _ in $(seq 50); do
    kill -0 "$NGINX_PID" 2>/dev/null || break
    if port_open "$RTMP_PORT" && port_open "$HTTP_PORT"; then up=1; break; fi
    sleep 0.1
  done
  [ -n "$up" ] && break
  log "nginx start attempt $attempt failed: $(tail -1 "$DIR/logs/error.log" 2>/dev/null)"
  kill -TERM "$NGINX_PID" 2>/dev/null; wait "$NGINX_PID" 2>/dev/null; NGINX_PID=
done
[ -n "$NGINX_PID" ] || { log "could not start nginx"; exit 1; }
echo "$RTMP_PORT $HTTP_PORT" > "$DIR/ports"

# --- publisher ------------------------------------------------------------------
# One encode; with CLEAR_COPY the tee muxer pushes the same FLV packets to both
# applications.  -flags +global_header is required with tee (otherwise the FLV
# AVC sequence header has no SPS/PPS and nginx-rtmp's hls drops the stream).
RTMP=rtmp://127.0.0.1:$RTMP_PORT
if [ "$CLEAR_COPY" = 1 ]; then
  OUT=(-flags +global_header -f tee "[f=flv]$RTMP/live/stream|[f=flv]$RTMP/clear/stream")
else
  OUT=(-f flv "$RTMP/live/stream")
fi
ffmpeg -nostdin -hide_banner -loglevel warning -re \
  -f lavfi -i "testsrc2=size=320x180:rate=25" \
  -f lavfi -i "sine=frequency=440:sample_rate=48000" \
  -t "$DURATION" -map 0:v -map 1:a \
  -c:v libx264 -preset ultrafast -tune zerolatency -pix_fmt yuv420p -g 50 \
  -force_key_frames "expr:gte(t,n_forced*$FRAGMENT)" \
  -c:a aac -b:a 64k -ac 2 \
  "${OUT[@]}" > /dev/null 2> "$DIR/publisher.log" &
PUB_PID=$!

PL=$DIR/www/hls/stream.m3u8
for _ in $(seq $((STARTUP_TIMEOUT * 10))); do
  [ -s "$PL" ] && break
  kill -0 "$PUB_PID" 2>/dev/null || break
  sleep 0.1
done
if ! [ -s "$PL" ]; then
  cat "$DIR/publisher.log" >&2; tail -5 "$DIR/logs/error.log" >&2
  log "no playlist after ${STARTUP_TIMEOUT}s"; cleanup; exit 1
fi
echo "http://127.0.0.1:$HTTP_PORT/hls/stream.m3u8"
log "playlist http://127.0.0.1:$HTTP_PORT/hls/stream.m3u8 rtmp $RTMP/live/stream (dir $DIR, nginx pid $NGINX_PID, publisher pid $PUB_PID)"

# --- run until nginx dies or we are signalled (bounded by DURATION + 120 s) ---
END=$(( $(date +%s) + ${DURATION%.*} + 120 ))
while kill -0 "$NGINX_PID" 2>/dev/null && [ "$(date +%s)" -lt "$END" ]; do
  sleep 1 & wait $!
done
log "exiting (nginx gone or time bound reached)"
cleanup
exit 0
