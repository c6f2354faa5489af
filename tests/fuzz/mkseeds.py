#!/usr/bin/env python3
"""mkseeds.py - writes the seed corpus of fuzz_proto (tests/fuzz/corpus/):
one valid frame per message shape, a multi-frame stream, and near misses."""
import os
import struct

def s(text):
    b = text.encode()
    return struct.pack('<H', len(b)) + b + b'\0'

def frame(typ, payload, flags=0):
    return struct.pack('<IHH', 8 + len(payload), typ, flags) + payload

def common(ts=1000, tid=4242):
    return struct.pack('<qII', ts, tid, 0)

POOL = struct.pack('<7II4Qq', 4, 8, 4, 2, 5, 1, 1, 0, 64, 3, 120, 0, 60_000_000_000)

SEEDS = {
    'hello': frame(0x0001, struct.pack('<HHIqqq', 2, 0, 4242, 1, 2, 3)
                   + s('0.1.0') + s('scope-demo') + s('/usr/bin/scope-demo')),
    'hello_ack': frame(0x0002, struct.pack('<HHI', 2, 0, 0)),
    'error': frame(0x0003, struct.pack('<iI', -13, 0) + s('permission denied')),
    'snapshot': frame(0x0010, struct.pack('<Qq', 1, 5))
                + frame(0x0100, common() + struct.pack('<QII', 0, 1, 0) + s('main'), 1)
                + frame(0x0011, struct.pack('<Qqq', 1, 6, 1)),
    'lost': frame(0x0012, struct.pack('<QQq', 10, 10, 7)),
    'thread_name': frame(0x0102, common() + s('worker-1')),
    'process_exit': frame(0x0103, common() + struct.pack('<Ii', 2, 11)),
    'site': frame(0x0013, struct.pack('<Ii', 1, 42) + s('demo.c') + s('serve')),
    'scope_open': frame(0x0013, struct.pack('<Ii', 1, 42) + s('demo.c') + s('serve'))
                  + frame(0x0110, common() + struct.pack('<4QqII', 7, 3, 12, 1, 0, 0, 1) + s('handle')),
    'task_life': frame(0x0013, struct.pack('<Ii', 2, 40) + s('demo.c') + s('serve'))
                 + frame(0x0120, common() + struct.pack('<QQQII', 12, 7, 0x401136, 0, 2))
                 + frame(0x0121, common() + struct.pack('<QQ', 12, 7))
                 + frame(0x0122, common() + struct.pack('<QQqII', 12, 7, -125, 4, 0)),
    'task_ran': frame(0x0120, common() + struct.pack('<QQQII', 13, 7, 0x401136, 0, 2))
                + frame(0x0123, common() + struct.pack('<QQqIIq', 13, 7, 0, 2, 0, 1900)),
    'hello_v3': frame(0x0001, struct.pack('<HHIqqq', 3, 0, 4242, 1, 2, 3)
                      + s('0.2.0') + s('scope-demo') + s('/usr/bin/scope-demo')),
    'task_done': frame(0x0124, common() + struct.pack('<QQQqIIIIqq', 14, 7, 0x401136, -5, 3, 2,
                                                          4243, 0, 1500, 1900))
                 + frame(0x0120, common() + struct.pack('<QQQII', 15, 7, 0x401136, 0, 2))
                 + frame(0x0123, common() + struct.pack('<QQqIIq', 15, 7, 0, 2, 0, 2100)),
    'hello_v4': frame(0x0001, struct.pack('<HHIqqq', 4, 0, 4242, 1, 2, 3)
                      + s('0.2.0') + s('scope-demo') + s('/usr/bin/scope-demo')),
    'scope_end': frame(0x0111, common() + struct.pack('<Q', 7))
                 + frame(0x0113, common() + struct.pack('<QII', 7, 2, 0))
                 + frame(0x0112, common() + struct.pack('<Qq', 7, -110))
                 + frame(0x0114, common() + struct.pack('<Qq', 7, 0)),
    'violation': frame(0x0130, common() + struct.pack('<QqII', 7, -20005, 4, 0)),
    'value_bind': frame(0x0131, common() + struct.pack('<Q', 7) + s('request_id') + s('r-17')),
    'pool': frame(0x0140, common() + struct.pack('<Q', 1) + POOL + s('io'))
            + frame(0x0141, common() + struct.pack('<Q', 1) + POOL)
            + frame(0x0142, common() + struct.pack('<Q', 1)),
    'stack_request': frame(0x0200, struct.pack('<QHHI', 9, 64, 3, 0)
                           + struct.pack('<3I', 100, 101, 102)),
    'stack_reply': frame(0x0201, struct.pack('<QIiqHHI', 9, 100, 0, 1500, 3, 0, 0)
                         + struct.pack('<3Q', 0x401000, 0x401234, 0x7f0000001000))
                   + frame(0x0202, struct.pack('<QIIqq', 9, 1, 0, 90000, 1500)),
    'unknown_in_range': frame(0x01f0, b'\0' * 12),
    'bad_unterminated': frame(0x0102, common() + b'\x03\x00abcd'),
    'bad_count': frame(0x0200, struct.pack('<QHHI', 9, 64, 5, 0) + struct.pack('<2I', 1, 2)),
}

def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus')
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)

if __name__ == '__main__':
    main()
