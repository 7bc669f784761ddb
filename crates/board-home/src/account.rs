//! The system users a profile's workers may run as (`profiles.<p>.user`): a name looked
//! up in the user database, with its primary group and every group it belongs to.

use std::ffi::{CStr, CString};

/// A user of this machine, as a worker would run: its ids and groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// Every group of the user, its primary group included.
    pub groups: Vec<u32>,
}

/// Why a user could not be looked up.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("{0:?} is not a user name")]
    NotAName(String),
    #[error("cannot look up user {name:?}: {source}")]
    Lookup { name: String, source: std::io::Error },
    #[error("no user named {0:?} on this machine")]
    NoSuchUser(String),
}

impl Account {
    /// Looks `name` up (`getpwnam_r`, `getgrouplist`); an unknown name is an error that
    /// says so.
    pub fn lookup(name: &str) -> Result<Account, AccountError> {
        let c_name = CString::new(name).map_err(|_| AccountError::NotAName(name.to_owned()))?;
        let mut buf = vec![0u8; 1024];
        loop {
            let mut entry: libc::passwd = unsafe_zeroed_passwd();
            let mut found: *mut libc::passwd = std::ptr::null_mut();
            // SAFETY: every pointer is valid for the call; `buf` outlives the use of
            // `entry`'s strings, which are not read.
            let rc = unsafe {
                libc::getpwnam_r(
                    c_name.as_ptr(),
                    &mut entry,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    &mut found,
                )
            };
            if rc == libc::ERANGE && buf.len() < 1 << 20 {
                buf.resize(buf.len() * 4, 0);
                continue;
            }
            if rc != 0 {
                return Err(AccountError::Lookup {
                    name: name.to_owned(),
                    source: std::io::Error::from_raw_os_error(rc),
                });
            }
            if found.is_null() {
                return Err(AccountError::NoSuchUser(name.to_owned()));
            }
            let (uid, gid) = (entry.pw_uid, entry.pw_gid);
            return Ok(Account {
                name: name.to_owned(),
                uid,
                gid,
                groups: groups_of(&c_name, gid),
            });
        }
    }
}

fn unsafe_zeroed_passwd() -> libc::passwd {
    // SAFETY: `passwd` is plain data (integers and pointers); all zeroes is a valid value
    // that getpwnam_r overwrites.
    unsafe { std::mem::zeroed() }
}

/// The groups of a user, its primary group first.
fn groups_of(name: &CStr, gid: u32) -> Vec<u32> {
    let mut count: libc::c_int = 32;
    loop {
        let mut groups = vec![0 as libc::gid_t; usize::try_from(count).unwrap_or(32)];
        let asked = count;
        // SAFETY: `groups` holds `count` entries; getgrouplist writes at most that many
        // and sets `count` to the number it has.
        let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut count) };
        if rc >= 0 {
            groups.truncate(usize::try_from(count).unwrap_or(0));
            if !groups.contains(&gid) {
                groups.insert(0, gid);
            }
            return groups;
        }
        // Too small: `count` now says how many there are.
        if count <= asked {
            count = asked * 2;
        }
        if count > 65536 {
            return vec![gid];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_uid_zero_and_an_unknown_name_is_refused() {
        let root = Account::lookup("root").expect("root exists");
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.groups.contains(&0));
        let unknown = Account::lookup("no-such-user-kanban").expect_err("unknown");
        assert_eq!(
            unknown.to_string(),
            "no user named \"no-such-user-kanban\" on this machine"
        );
        assert!(Account::lookup("bad\0name").is_err());
    }
}
