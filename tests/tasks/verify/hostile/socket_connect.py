import socket


def verify(sg):
    conn = socket.create_connection(("127.0.0.1", PORT), timeout=1)
    conn.sendall(b"leak")
    return "connected"
