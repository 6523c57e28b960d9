//! Every limit the server enforces on what it is sent or keeps, in one place: the README's
//! limits table lists the same, each with its flag where a user may need to raise it. Limits
//! with a flag hold the default here; `config` carries the chosen value.

// Rendering of pickled values (`pickle`, `pretty`, `render`; README "Trust model"): every
// rendered value (one repr text, one JSON display value, one structured view) gets one budget,
// proportional to its payload and capped, because values shared through the pickle memo would
// otherwise be copied out once per reference (a few hundred bytes can stand for gigabytes).
// The budget counts output bytes (JSON forms also charge each value's overhead) and,
// separately, node visits, so time is bounded too; when either runs out the output stops with
// a marker: `...<output limit>` in text, `"<cut: render budget>"` in JSON.

/// Render budget per payload byte: output bytes and node visits, each.
pub const RENDER_PER_INPUT_BYTE: usize = 16;
/// Render budget of a repr text or a display value on top of `RENDER_PER_INPUT_BYTE` times the
/// payload (small values never reach it). Small, because listings show many values at once.
pub const RENDER_SLACK: usize = 32 * 1024;
/// The same for a structured view, shown one at a time: nested views of small containers
/// (each with its type, repr and attributes) are larger than their payload.
pub const RENDER_VIEW_SLACK: usize = 256 * 1024;
/// Render budget at most, whatever the payload size (also the longest repr text).
pub const RENDER_MAX: usize = 16 << 20;
/// What one JSON value (or key) costs beyond its text: about its size in memory.
pub const RENDER_JSON_VALUE_COST: usize = 32;
/// What the memoized lookups of one decoded pickle (class descriptions and the names they
/// share; indexes of larger dicts, each smaller than its dict, are not counted) may keep, per
/// input byte ...
pub const RENDER_LOOKUP_PER_INPUT_BYTE: usize = 8;
/// ... plus this many bytes; a class found once it is spent renders in the generic forms.
pub const RENDER_LOOKUP_SLACK: usize = 256 * 1024;
/// Stated bound of the memory used while decoding and rendering one payload (decoder, tree,
/// caches and the rendered value): at most this many bytes per payload byte ...
pub const RENDER_MEMORY_PER_INPUT_BYTE: usize = 128;
/// ... plus this many bytes (checked by the property tests of `tests/pickle_props.rs`).
pub const RENDER_MEMORY_SLACK: usize = 8 << 20;
