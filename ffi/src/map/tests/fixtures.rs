//! Map layouts produced by the official library 0.1.15.post2 (written from the
//! output of `tests/probe/map_layout.py`).

use super::Dense;

/// `map5` as the official library lays it out.
pub(super) const MAP5: Dense = Dense {
    slots: 8,
    fib_shift: 61,
    head: 4,
    tail: 3,
    meta: &[128, 0, 255, 0, 0, 255, 255, 1],
    items: &[
        (0, "S:a-long-key-number-3", "i3", 7, 3),
        (1, "s:key1", "i1", 4, 7),
        (3, "s:key4", "i4", 0, -1),
        (4, "S:a-long-key-number-0", "i0", -1, 1),
        (7, "s:key2", "i2", 1, 0),
    ],
};

/// `map6` as the official library lays it out.
pub(super) const MAP6: Dense = Dense {
    slots: 8,
    fib_shift: 61,
    head: 4,
    tail: 0,
    meta: &[0, 0, 128, 0, 0, 255, 255, 3],
    items: &[
        (0, "s:key5", "i5", 3, -1),
        (1, "s:key1", "i1", 4, 7),
        (2, "S:a-long-key-number-3", "i3", 7, 3),
        (3, "s:key4", "i4", 2, 0),
        (4, "S:a-long-key-number-0", "i0", -1, 1),
        (7, "s:key2", "i2", 1, 2),
    ],
};

/// `map17` as the official library lays it out.
pub(super) const MAP17: Dense = Dense {
    slots: 32,
    fib_shift: 59,
    head: 18,
    tail: 0,
    meta: &[
        128, 255, 255, 0, 255, 255, 255, 0, 2, 0, 128, 255, 0, 0, 0, 255, 0, 0, 1, 128, 255, 255,
        255, 255, 255, 0, 255, 0, 255, 255, 0, 1,
    ],
    items: &[
        (0, "s:key16", "i16", 14, -1),
        (3, "s:key5", "i5", 12, 13),
        (7, "s:key1", "i1", 18, 30),
        (8, "S:a-long-key-number-12", "i12", 25, 10),
        (9, "s:key8", "i8", 19, 27),
        (10, "s:key13", "i13", 8, 16),
        (12, "s:key4", "i4", 31, 3),
        (13, "S:a-long-key-number-6", "i6", 3, 19),
        (14, "S:a-long-key-number-15", "i15", 16, 0),
        (16, "s:key14", "i14", 10, 14),
        (17, "s:key10", "i10", 27, 25),
        (18, "S:a-long-key-number-0", "i0", -1, 7),
        (19, "s:key7", "i7", 13, 9),
        (25, "s:key11", "i11", 17, 8),
        (27, "S:a-long-key-number-9", "i9", 9, 17),
        (30, "s:key2", "i2", 7, 31),
        (31, "S:a-long-key-number-3", "i3", 30, 12),
    ],
};

/// `int30` as the official library lays it out.
pub(super) const INT30: Dense = Dense {
    slots: 32,
    fib_shift: 59,
    head: 18,
    tail: 4,
    meta: &[
        0, 0, 3, 0, 0, 128, 0, 2, 0, 128, 255, 0, 2, 0, 128, 0, 0, 6, 0, 0, 0, 0, 0, 128, 0, 0, 0,
        0, 255, 0, 0, 0,
    ],
    items: &[
        (0, "i23757", "i-1", 15, 4),
        (1, "i221732", "i28", 5, 15),
        (2, "i110866", "i14", 3, 23),
        (3, "i102947", "i13", 21, 2),
        (4, "i0", "i-2", 0, -1),
        (5, "i213813", "i27", 19, 1),
        (6, "i190056", "i24", 9, 20),
        (7, "i79190", "i10", 8, 22),
        (8, "i71271", "i9", 26, 7),
        (9, "i182137", "i23", 24, 6),
        (11, "i158380", "i20", 14, 25),
        (12, "i47514", "i6", 13, 27),
        (13, "i39595", "i5", 31, 12),
        (14, "i150461", "i19", 29, 11),
        (15, "i229651", "i29", 1, 0),
        (16, "i126704", "i16", 23, 30),
        (17, "i15838", "i2", 18, 31),
        (18, "i7919", "i1", -1, 17),
        (19, "i205894", "i26", 20, 5),
        (20, "i197975", "i25", 6, 19),
        (21, "i95028", "i12", 22, 3),
        (22, "i87109", "i11", 7, 21),
        (23, "i118785", "i15", 2, 16),
        (24, "i174218", "i22", 25, 9),
        (25, "i166299", "i21", 11, 24),
        (26, "i63352", "i8", 27, 8),
        (27, "i55433", "i7", 12, 26),
        (29, "i142542", "i18", 30, 14),
        (30, "i134623", "i17", 16, 29),
        (31, "i31676", "i4", 17, 13),
    ],
};

/// `small_full_update` as the official library lays it out.
pub(super) const SMALL_FULL_UPDATE: Dense = Dense {
    slots: 8,
    fib_shift: 61,
    head: 4,
    tail: 0,
    meta: &[0, 255, 0, 255, 0, 0, 255, 255],
    items: &[
        (0, "s:a", "i5", 5, -1),
        (2, "s:c", "i3", 4, 5),
        (4, "s:b", "i2", -1, 2),
        (5, "s:d", "i4", 2, 0),
    ],
};

/// `dict_log_last` as the official library lays it out.
pub(super) const DICT_LOG_LAST: Dense = Dense {
    slots: 16,
    fib_shift: 60,
    head: 2,
    tail: 14,
    meta: &[0, 255, 0, 0, 255, 0, 0, 255, 255, 0, 0, 0, 255, 255, 0, 255],
    items: &[
        (0, "s:k6", "i6", 9, 3),
        (2, "s:k2", "i2", -1, 9),
        (3, "s:k7", "i7", 0, 6),
        (5, "s:k3", "i33", 11, 14),
        (6, "s:k8", "i8", 3, 10),
        (9, "s:k4", "i4", 2, 0),
        (10, "s:k9", "i9", 6, 11),
        (11, "s:k10", "i10", 10, 5),
        (14, "s:k1", "i11", 5, -1),
    ],
};

/// `(small capacity or 0, dense slots or 0, size)` after each step of the Dict script.
pub(super) const DICT_STEPS: &[(u64, u64, u64)] = &[
    (2, 0, 1),
    (2, 0, 2),
    (4, 0, 3),
    (4, 0, 4),
    (0, 8, 5),
    (0, 8, 6),
    (0, 8, 7),
    (0, 16, 8),
    (0, 16, 9),
    (0, 16, 10),
    (0, 16, 11),
    (0, 16, 12),
    (0, 16, 11),
    (0, 16, 10),
    (0, 16, 9),
    (0, 16, 8),
    (0, 16, 9),
];
