//! Aligning two sequences (the calls of two runs): an edit-distance alignment that keeps the
//! longest common subsequence of keys, so that a call inserted or missing in one run shifts
//! nothing else. The common prefix and suffix are matched first; the rest is aligned with a
//! table of at most `a.len() * b.len()` 16-bit cells (the caller bounds both lengths, see
//! `limits::MAX_COMPARE_CALLS`). On a tie, what only the first sequence holds comes first.
//! Pure.

/// One step of an alignment: indexes into the first and second sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Both(usize, usize),
    OnlyA(usize),
    OnlyB(usize),
}

/// Sequences longer than this are not aligned by the table (its cells count to it).
pub const MAX_LEN: usize = u16::MAX as usize;

/// The alignment of `a` and `b` by equal keys. Both must hold at most [`MAX_LEN`] items; longer
/// ones are cut to it (the caller bounds them well below).
pub fn align<K: PartialEq>(a: &[K], b: &[K]) -> Vec<Step> {
    let a = &a[..a.len().min(MAX_LEN)];
    let b = &b[..b.len().min(MAX_LEN)];
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut steps: Vec<Step> = (0..prefix).map(|i| Step::Both(i, i)).collect();
    steps.extend(middle(ma, mb).into_iter().map(|s| match s {
        Step::Both(i, j) => Step::Both(i + prefix, j + prefix),
        Step::OnlyA(i) => Step::OnlyA(i + prefix),
        Step::OnlyB(j) => Step::OnlyB(j + prefix),
    }));
    let (ta, tb) = (a.len() - suffix, b.len() - suffix);
    steps.extend((0..suffix).map(|k| Step::Both(ta + k, tb + k)));
    steps
}

/// The alignment of two sequences without a common prefix or suffix: `lcs[i][j]` is the length
/// of the longest common subsequence of `a[i..]` and `b[j..]`, walked from the start.
fn middle<K: PartialEq>(a: &[K], b: &[K]) -> Vec<Step> {
    let (n, m) = (a.len(), b.len());
    if n == 0 || m == 0 {
        return (0..n)
            .map(Step::OnlyA)
            .chain((0..m).map(Step::OnlyB))
            .collect();
    }
    let w = m + 1;
    let mut lcs = vec![0u16; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * w + j] = if a[i] == b[j] {
                lcs[(i + 1) * w + j + 1] + 1
            } else {
                lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
            };
        }
    }
    let mut steps = Vec::with_capacity(n + m);
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if a[i] == b[j] {
            steps.push(Step::Both(i, j));
            i += 1;
            j += 1;
        } else if lcs[(i + 1) * w + j] >= lcs[i * w + j + 1] {
            steps.push(Step::OnlyA(i));
            i += 1;
        } else {
            steps.push(Step::OnlyB(j));
            j += 1;
        }
    }
    steps.extend((i..n).map(Step::OnlyA));
    steps.extend((j..m).map(Step::OnlyB));
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use Step::{Both, OnlyA, OnlyB};

    fn keys(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    fn run(a: &str, b: &str) -> Vec<Step> {
        align(&keys(a), &keys(b))
    }

    #[test]
    fn equal_sequences_pair_every_item() {
        assert_eq!(run("abc", "abc"), [Both(0, 0), Both(1, 1), Both(2, 2)]);
    }

    #[test]
    fn an_inserted_call_shifts_nothing_else() {
        assert_eq!(
            run("abcd", "abxcd"),
            [Both(0, 0), Both(1, 1), OnlyB(2), Both(2, 3), Both(3, 4)]
        );
        // Inserted in the middle of a repeated pattern.
        let steps = run("ababab", "abaXbab");
        assert_eq!(steps.iter().filter(|s| matches!(s, OnlyB(_))).count(), 1);
        assert_eq!(steps.iter().filter(|s| matches!(s, Both(..))).count(), 6);
    }

    #[test]
    fn a_missing_call_is_only_in_the_first() {
        assert_eq!(
            run("abcd", "abd"),
            [Both(0, 0), Both(1, 1), OnlyA(2), Both(3, 2)]
        );
    }

    #[test]
    fn a_changed_key_is_one_removal_and_one_insertion() {
        assert_eq!(
            run("axc", "ayc"),
            [Both(0, 0), OnlyA(1), OnlyB(1), Both(2, 2)]
        );
    }

    #[test]
    fn reordered_calls_keep_the_longest_common_order() {
        let steps = run("abcd", "acbd");
        assert_eq!(steps.len(), 5);
        assert_eq!(steps.iter().filter(|s| matches!(s, Both(..))).count(), 3);
        assert_eq!(steps[0], Both(0, 0));
        assert_eq!(steps[4], Both(3, 3));
    }

    #[test]
    fn empty_runs() {
        assert!(run("", "").is_empty());
        assert_eq!(run("ab", ""), [OnlyA(0), OnlyA(1)]);
        assert_eq!(run("", "ab"), [OnlyB(0), OnlyB(1)]);
    }

    #[test]
    fn every_item_appears_once_in_order() {
        // A pseudo-random pair of sequences over a small alphabet.
        let mut x: u32 = 12345;
        let mut next = || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) % 4
        };
        let a: Vec<u32> = (0..300).map(|_| next()).collect();
        let b: Vec<u32> = (0..280).map(|_| next()).collect();
        let steps = align(&a, &b);
        let (mut ia, mut ib) = (0, 0);
        for s in &steps {
            match *s {
                Both(i, j) => {
                    assert_eq!((i, j), (ia, ib));
                    assert_eq!(a[i], b[j]);
                    ia += 1;
                    ib += 1;
                }
                OnlyA(i) => {
                    assert_eq!(i, ia);
                    ia += 1;
                }
                OnlyB(j) => {
                    assert_eq!(j, ib);
                    ib += 1;
                }
            }
        }
        assert_eq!((ia, ib), (300, 280));
    }

    #[test]
    fn long_sequences_are_bounded() {
        // The caller's bound: a thousand calls each, all different, answer quickly with every
        // item once.
        let a: Vec<u32> = (0..1000).collect();
        let b: Vec<u32> = (1000..2000).collect();
        let steps = align(&a, &b);
        assert_eq!(steps.len(), 2000);
        // Beyond MAX_LEN the sequences are cut.
        let long = vec![0u8; MAX_LEN + 5];
        assert_eq!(align(&long, &long).len(), MAX_LEN);
    }
}
