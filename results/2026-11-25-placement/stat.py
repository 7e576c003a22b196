import socket, struct, sys
port=int(sys.argv[1]); group=sys.argv[2].encode() if len(sys.argv)>2 else b""
s=socket.create_connection(('127.0.0.1',port))
s.sendall(struct.pack('>BBHBBHIIQ',0x80,0x10,len(group),0,0,0,len(group),0,0)+group)
buf=b""
while True:
    while len(buf)<24: buf+=s.recv(65536)
    _,_,kl,el,_,st,bl,_,_=struct.unpack('>BBHBBHIIQ',buf[:24])
    while len(buf)<24+bl: buf+=s.recv(65536)
    k=buf[24+el:24+el+kl]; v=buf[24+el+kl:24+bl]; buf=buf[24+bl:]
    if kl==0: break
    print(k.decode(), v.decode())
