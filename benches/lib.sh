# Helpers the load benchmarks share (`proxy-load.sh`, `record-overhead.sh` source this file):
# free ports, waiting for a server, and nginx answering POSTs with a static file. The caller
# sets $work (its scratch folder) and a `pids` array that its cleanup kills.

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_http() { # url
  for _ in $(seq 100); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.1
  done
  echo "nothing answers at $1" >&2
  exit 1
}

# nginx serving ROOT on PORT, every file (they have no extension) as TYPE, with WORKERS worker
# processes. A POST to a static file, which nginx answers 405, is turned into 200 with the file,
# so nginx stands in for the vendor while recording and is the baseline while replaying.
start_nginx() { # port, root, content type, workers
  local conf="$work/nginx/$1.conf"
  mkdir -p "$work/nginx" "$work/tmp"
  cat >"$conf" <<CONF
worker_processes $4;
daemon off;
pid $work/nginx/$1.pid;
error_log $work/nginx/$1.err warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/tmp;
  proxy_temp_path $work/tmp;
  fastcgi_temp_path $work/tmp;
  uwsgi_temp_path $work/tmp;
  scgi_temp_path $work/tmp;
  keepalive_requests 100000000;
  types { }
  server {
    listen 127.0.0.1:$1;
    root $2;
    default_type $3;
    error_page 405 =200 \$uri;
  }
}
CONF
  nginx -c "$conf" &
  pids+=($!)
  wait_http "http://127.0.0.1:$1/"
}
