#!/usr/bin/env bash
# ffmpeg-live.sh DIR
#
# Live HLS source written by ffmpeg's own HLS muxer (real time, -re), sliding
# window, delete_segments, AES-128 with key rotation via -hls_key_info_file +
# periodic_rekey, served over HTTP on 127.0.0.1:<OS-assigned port>.
#
# stdout: exactly one line, the playlist URL, printed once the playlist exists.
# Everything else goes to stderr / log files under DIR.
# SIGTERM/SIGINT: stops ffmpeg (see STOP_MODE), the rekey loop and the HTTP
# server, then exits 0.  The server dies with it, so a client cannot fetch
# the final segment / ENDLIST playlist after SIGTERM.
# SIGUSR1: end the stream gracefully (ffmpeg writes the last short segment and
# EXT-X-ENDLIST) but keep serving for LINGER_SECONDS (or until SIGTERM).
#
# Layout (everything under DIR):
#   www/live.m3u8 www/segN.ts      what is served (encrypted, sliding window)
#   www/keys/kN.key                every key ever used (never deleted)
#   clear/live.m3u8 clear/segN.ts  oracle: the *same muxed bytes* unencrypted,
#                                  complete (no window, never deleted), written
#                                  by the same ffmpeg process via the tee muxer
#   keys.tsv                       "name<TAB>keyhex<TAB>ivhex|-<TAB>epoch" per key
#   keyinfo ffmpeg.log server.log port
#
# Environment knobs (defaults):
#   HLS_TIME=2 LIST_SIZE=4        segment target / window length
#   REKEY_SECONDS=6               rewrite key+keyinfo every N s (0 = no rotation)
#   IV_MODE=random                random: explicit random IV per key (IV=0x.. in
#                                 the playlist, same IV for all segments of a key)
#                                 sequence: no IV in keyinfo; ffmpeg then writes
#                                 IV=0x<media sequence number> and a fresh
#                                 EXT-X-KEY tag before *every* segment
#   KEY_URI=relative              relative: URI="keys/kN.key"; absolute:
#                                 URI="http://127.0.0.1:PORT/keys/kN.key"
#   SEGMENT_TYPE=mpegts           fmp4 only with ENCRYPT=0 (ffmpeg refuses
#                                 "Encrypted fmp4 not yet supported")
#   ENCRYPT=1                     0 = clear stream (no key info)
#   CLEAR_COPY=1                  0 = no clear/ oracle output
#   DURATION=600                  ffmpeg -t: stream ends by itself (ENDLIST)
#                                 after N s; hard safety bound as well
#   LINGER_SECONDS=60             after ffmpeg ends on its own, keep serving
#                                 this long (or until SIGTERM), then exit
#   STOP_MODE=graceful            on SIGTERM: graceful = SIGINT to ffmpeg (it
#                                 finishes the current segment and writes
#                                 EXT-X-ENDLIST); kill = SIGKILL (no ENDLIST)
#   STARTUP_TIMEOUT=30            give up if no playlist after N s
set -u

DIR=${1:?usage: ffmpeg-live.sh DIR}
HLS_TIME=${HLS_TIME:-2}
LIST_SIZE=${LIST_SIZE:-4}
REKEY_SECONDS=${REKEY_SECONDS:-6}
IV_MODE=${IV_MODE:-random}
KEY_URI=${KEY_URI:-relative}
SEGMENT_TYPE=${SEGMENT_TYPE:-mpegts}
ENCRYPT=${ENCRYPT:-1}
CLEAR_COPY=${CLEAR_COPY:-1}
DURATION=${DURATION:-600}
LINGER_SECONDS=${LINGER_SECONDS:-60}
STOP_MODE=${STOP_MODE:-graceful}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-30}
HERE=$(cd "$(dirname "$0")" && pwd)

log() { echo "ffmpeg-live: $*" >&2; }
die() { log "$*"; cleanup; exit 1; }

if [ "$SEGMENT_TYPE" = fmp4 ] && [ "$ENCRYPT" = 1 ]; then
  log "ffmpeg's HLS muxer cannot encrypt fmp4 (\"Encrypted fmp4 not yet supported\"); use ENCRYPT=0"
  exit 2
fi
case $SEGMENT_TYPE in mpegts) EXT=ts ;; fmp4) EXT=m4s ;; *) log "bad SEGMENT_TYPE"; exit 2 ;; esac

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
WWW=$DIR/www
mkdir -p "$WWW/keys" "$DIR/clear"
: > "$DIR/keys.tsv"

SERVER_PID= FFMPEG_PID= REKEY_PID= SLEEP_PID=
cleanup() {
  trap - TERM INT EXIT
  [ -n "$REKEY_PID" ] && kill "$REKEY_PID" 2>/dev/null
  if [ -n "$FFMPEG_PID" ] && kill -0 "$FFMPEG_PID" 2>/dev/null; then
    if [ "$STOP_MODE" = kill ]; then
      kill -KILL "$FFMPEG_PID" 2>/dev/null
    else
      kill -INT "$FFMPEG_PID" 2>/dev/null
      for _ in $(seq 50); do kill -0 "$FFMPEG_PID" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$FFMPEG_PID" 2>/dev/null
    fi
  fi
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
  [ -n "$SLEEP_PID" ] && kill "$SLEEP_PID" 2>/dev/null
  wait 2>/dev/null
}
on_signal() { log "stopping"; cleanup; exit 0; }
end_stream() {  # SIGUSR1: end the stream (ENDLIST) but keep serving
  log "SIGUSR1: ending stream, still serving"
  [ -n "$REKEY_PID" ] && kill "$REKEY_PID" 2>/dev/null
  [ -n "$FFMPEG_PID" ] && kill -INT "$FFMPEG_PID" 2>/dev/null
}
trap on_signal TERM INT
trap end_stream USR1

# --- HTTP server on 127.0.0.1:0 --------------------------------------------
rm -f "$DIR/port"
python3 "$HERE/serve.py" "$WWW" "$DIR/port" > /dev/null 2> "$DIR/server.log" &
SERVER_PID=$!
for _ in $(seq 100); do [ -s "$DIR/port" ] && break; sleep 0.1; done
[ -s "$DIR/port" ] || die "http server did not start"
PORT=$(cat "$DIR/port")
BASE=http://127.0.0.1:$PORT

# --- keys ---------------------------------------------------------------------
KEYN=0
new_key() {  # writes www/keys/kN.key then atomically swaps keyinfo to it
  local name=k$KEYN key iv uri
  key=$(openssl rand -hex 16)
  echo "$key" | xxd -r -p > "$WWW/keys/$name.key.tmp"
  mv "$WWW/keys/$name.key.tmp" "$WWW/keys/$name.key"
  if [ "$KEY_URI" = absolute ]; then uri=$BASE/keys/$name.key; else uri=keys/$name.key; fi
  if [ "$IV_MODE" = random ]; then
    iv=$(openssl rand -hex 16)
    printf '%s\n%s\n%s\n' "$uri" "$WWW/keys/$name.key" "$iv" > "$DIR/keyinfo.tmp"
  else
    iv=-
    printf '%s\n%s\n' "$uri" "$WWW/keys/$name.key" > "$DIR/keyinfo.tmp"
  fi
  mv "$DIR/keyinfo.tmp" "$DIR/keyinfo"
  printf '%s\t%s\t%s\t%s\n' "$name" "$key" "$iv" "$(date +%s.%N)" >> "$DIR/keys.tsv"
  KEYN=$((KEYN + 1))
}

HLS_FLAGS=delete_segments
ENC_OPTS=
if [ "$ENCRYPT" = 1 ]; then
  new_key
  [ "$REKEY_SECONDS" != 0 ] && HLS_FLAGS=$HLS_FLAGS+periodic_rekey
  ENC_OPTS=":hls_key_info_file=$DIR/keyinfo"
fi

# --- ffmpeg -------------------------------------------------------------------
# One encode, two HLS muxers via tee: the served encrypted one and a complete
# clear copy.  Same packets + same segmenting => decrypt(www/segN) == clear/segN.
OUT="[f=hls:hls_time=$HLS_TIME:hls_list_size=$LIST_SIZE:hls_segment_type=$SEGMENT_TYPE:hls_flags=$HLS_FLAGS$ENC_OPTS:hls_segment_filename=$WWW/seg%d.$EXT]$WWW/live.m3u8"
if [ "$CLEAR_COPY" = 1 ]; then
  OUT="$OUT|[f=hls:hls_time=$HLS_TIME:hls_list_size=0:hls_segment_type=$SEGMENT_TYPE:hls_segment_filename=$DIR/clear/seg%d.$EXT]$DIR/clear/live.m3u8"
fi
rm -f "$WWW/live.m3u8"
ffmpeg -nostdin -hide_banner -loglevel warning -re \
  -f lavfi -i "testsrc2=size=320x180:rate=25" \
  -f lavfi -i "sine=frequency=440:sample_rate=48000" \
  -t "$DURATION" -map 0:v -map 1:a \
  -c:v libx264 -preset ultrafast -tune zerolatency -pix_fmt yuv420p -g 50 \
  -force_key_frames "expr:gte(t,n_forced*$HLS_TIME)" \
  -c:a aac -b:a 64k -ac 2 \
  -f tee "$OUT" > /dev/null 2> "$DIR/ffmpeg.log" &
FFMPEG_PID=$!

if [ "$ENCRYPT" = 1 ] && [ "$REKEY_SECONDS" != 0 ]; then
  (
    SL=
    trap '[ -n "$SL" ] && kill $SL 2>/dev/null; exit 0' TERM
    # bounded: at most DURATION/REKEY_SECONDS+1 rotations, stops with ffmpeg
    for _ in $(seq $(( ${DURATION%.*} / REKEY_SECONDS + 1 ))); do
      sleep "$REKEY_SECONDS" & SL=$!; wait $SL; SL=
      kill -0 "$FFMPEG_PID" 2>/dev/null || exit 0
      new_key
    done
  ) &
  REKEY_PID=$!
fi

# --- wait for the playlist, announce it ---------------------------------------
for _ in $(seq $((STARTUP_TIMEOUT * 10))); do
  [ -s "$WWW/live.m3u8" ] && break
  kill -0 "$FFMPEG_PID" 2>/dev/null || break
  sleep 0.1
done
[ -s "$WWW/live.m3u8" ] || { cat "$DIR/ffmpeg.log" >&2; die "no playlist after ${STARTUP_TIMEOUT}s"; }
echo "$BASE/live.m3u8"
log "playlist $BASE/live.m3u8 (dir $DIR, ffmpeg pid $FFMPEG_PID, server pid $SERVER_PID)"

# --- run until ffmpeg ends (DURATION) or we are signalled ---------------------
while kill -0 "$FFMPEG_PID" 2>/dev/null; do wait "$FFMPEG_PID"; done
log "ffmpeg exited; serving for ${LINGER_SECONDS}s more"
FFMPEG_PID=
[ -n "$REKEY_PID" ] && kill "$REKEY_PID" 2>/dev/null
sleep "$LINGER_SECONDS" & SLEEP_PID=$!
wait $SLEEP_PID
cleanup
exit 0
