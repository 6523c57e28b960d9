//! Enum classes pickled by value: found once per renderer, and what was found for each member.

use super::*;

/// Enum classes pickled by value, found once per renderer, and what was found for each member.
#[derive(Default)]
pub(super) struct EnumIndex {
    /// Classes by `(module, qualname)` and by `(module, name)`, in node order.
    pub(super) by_name: HashMap<(Rc<str>, Rc<str>), Vec<NodeId>>,
    /// Members of each class examined: `None` when its dict has no `_member_map_`.
    pub(super) classes: NodeMap<NodeId, Option<Rc<EnumMembers>>>,
    /// The answer for each object asked about.
    pub(super) found: NodeMap<NodeId, Option<String>>,
}

/// The `_member_map_` of one enum class.
pub(super) struct EnumMembers {
    /// `Class` of `Class.NAME`.
    pub(super) name: String,
    /// Member node to its key node (the first pair naming it).
    pub(super) ids: NodeMap<NodeId, NodeId>,
    /// `(value, key)` of the single-bit int members, in map order; `None` when some member has
    /// no int value (then no combination is named) or there are too many.
    pub(super) flags: Option<Vec<(i64, NodeId)>>,
}

impl EnumIndex {
    pub(super) fn new(t: &Tree, budget: &Budget) -> Self {
        let mut index = EnumIndex::default();
        for c in 0..t.nodes.len() as NodeId {
            let is_class = t
                .object_of(c)
                .is_some_and(|o| matches!(callee(t, o), Some(("dill._dill", "_create_type"))));
            let Some(ti) = is_class.then(|| type_info(t, c, 8)).flatten() else {
                continue;
            };
            if !ti.enum_class {
                continue;
            }
            let mut add = |n: Rc<str>| {
                let key = (ti.module.clone(), n);
                index.by_name.entry(key).or_default().push(c);
            };
            add(ti.qualname.clone());
            if ti.name() != &*ti.qualname {
                // A copy of the last part of the name, paid from the render budget.
                budget.charge(ti.name().len());
                add(Rc::from(ti.name()));
            }
        }
        index
    }

    pub(super) fn member(
        &mut self,
        t: &Tree,
        id: NodeId,
        o: &Object,
        module: &str,
        name: &str,
    ) -> Option<String> {
        let key: (Rc<str>, Rc<str>) = (Rc::from(module), Rc::from(name));
        let candidates: Vec<NodeId> = self
            .by_name
            .get(&key)?
            .iter()
            .take(MAX_ENUM_CANDIDATES)
            .copied()
            .collect();
        for c in candidates {
            // A class without a member map ends the search, as the first match decides.
            let members = match self.classes.get(&c) {
                Some(m) => m.clone(),
                None => {
                    let m = EnumMembers::of(t, c).map(Rc::new);
                    self.classes.insert(c, m.clone());
                    m
                }
            }?;
            if let Some(&k) = members.ids.get(&id) {
                return Some(format!("{}.{}", members.name, t.str_of(k)?));
            }
            // A Flag combination: the members whose bits it holds, in definition order.
            let value = items(t, o.args).first().and_then(|&a| int_of(t, a))?;
            let mut names = Vec::new();
            let mut covered = 0i64;
            for &(mv, k) in members.flags.as_ref()? {
                if value & mv == mv {
                    names.push(t.str_of(k)?);
                    covered |= mv;
                }
            }
            if covered == value && !names.is_empty() {
                return Some(format!("{}.{}", members.name, names.join("|")));
            }
        }
        None
    }
}

impl EnumMembers {
    pub(super) fn of(t: &Tree, c: NodeId) -> Option<EnumMembers> {
        let ti = type_info(t, c, 8)?;
        let dict = t
            .object_of(c)
            .and_then(|co| items(t, co.args).get(3).copied())?;
        let map = dict_get(t, dict, "_member_map_")?;
        let pairs = dict_pairs(t, map);
        let mut ids = NodeMap::default();
        for &(k, v) in pairs {
            ids.entry(v).or_insert(k);
        }
        let mut flags = Some(Vec::new());
        for &(k, v) in pairs {
            let mv = t
                .object_of(v)
                .and_then(|m| items(t, m.args).first().copied())
                .and_then(|a| int_of(t, a));
            match (mv, flags.as_mut()) {
                (None, _) => {
                    flags = None;
                    break;
                }
                (Some(mv), Some(f)) if mv != 0 && mv.count_ones() == 1 => {
                    if f.len() == MAX_FLAG_MEMBERS {
                        flags = None;
                        break;
                    }
                    f.push((mv, k));
                }
                _ => {}
            }
        }
        Some(EnumMembers {
            name: ti.name().to_owned(),
            ids,
            flags,
        })
    }
}
