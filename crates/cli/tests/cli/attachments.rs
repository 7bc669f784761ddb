//! `attach`, `attachments`, `attach-get`, `attach-rm`: files on cards with Hermes' lines,
//! byte for byte through the board, refused in one line when they are not plain files
//! within the cap, and handed to a worker in its workspace.

use std::os::unix::fs::symlink;

use board_core::Status;

use crate::common::Board;
use crate::gateway_board::{worker_profile, GatewayBoard, Setup};

/// The SHA-256 of `bytes` as coreutils' `sha256sum` prints it.
fn hex(bytes: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

#[test]
fn a_file_goes_in_and_comes_out_byte_for_byte_with_hermes_lines() {
    let board = Board::init();
    let id = board.create(&["with files"]);
    let bytes: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let path = board.dir.path().join("report.bin");
    std::fs::write(&path, &bytes).unwrap();
    let path = path.to_str().unwrap();
    assert_eq!(
        board.ok(&["attach", &id, path]),
        format!("Attached report.bin to {id} (attachment 1, 1000 bytes)\n")
    );
    let again = board.json(&["attach", &id, path, "--name", "../report.bin", "--author", "ana"]);
    assert_eq!(
        (again["id"].as_i64(), again["name"].as_str()),
        (Some(2), Some("report (1).bin"))
    );
    assert_eq!(again["sha256"], hex(&bytes));
    assert_eq!(again["created_by"], "ana");

    let listed = board.ok(&["attachments", &id]);
    assert!(
        listed.starts_with(&format!("Attachments on {id}:\n  [1] report.bin  (1000 bytes, ")),
        "{listed}"
    );
    assert!(
        listed.contains("[2] report (1).bin  (1000 bytes,") && listed.contains(&hex(&bytes)),
        "{listed}"
    );
    assert_eq!(board.json(&["attachments", &id]).as_array().unwrap().len(), 2);
    assert!(board.ok(&["show", &id]).contains("Attachments\n  [1] report.bin"));
    assert_eq!(
        board.json(&["show", &id])["attachments"][1]["name"],
        "report (1).bin"
    );

    let out = board.dir.path().join("out.bin");
    board.ok(&["attach-get", "1", "--out", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), bytes);
    let piped = board.kanban(&["attach-get", "2"]).output().unwrap();
    assert!(piped.status.success());
    assert_eq!(piped.stdout, bytes);

    assert_eq!(
        board.ok(&["attach-rm", "1"]),
        format!("Deleted attachment 1 (report.bin) from {id}\n")
    );
    let kinds: Vec<String> = board
        .json(&["events", &id, "--kind", "attached,detached"])
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["attached", "attached", "detached"]);
    let other = board.create(&["empty"]);
    assert_eq!(
        board.ok(&["attachments", &other]),
        format!("No attachments on {other}\n")
    );
}

#[test]
fn links_devices_pipes_directories_and_big_files_are_refused_in_one_line_writing_nothing() {
    let board = Board::init();
    board.ok(&["config", "set", "kanban.attachment_max_bytes", "10"]);
    let id = board.create(&["x"]);
    let dir = board.dir.path();
    std::fs::write(dir.join("small.txt"), b"0123456789").unwrap();
    std::fs::write(dir.join("big.txt"), b"0123456789A").unwrap();
    symlink(dir.join("small.txt"), dir.join("link.txt")).unwrap();
    let fifo = dir.join("pipe");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    std::fs::write(dir.join("taken.bin"), b"mine").unwrap();
    let before = board.snapshot();
    let at = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let cases: Vec<(Vec<String>, i32, &str)> = vec![
        (vec![id.clone(), at("link.txt")], 1, "symbolic link"),
        (
            vec![id.clone(), at("big.txt")],
            1,
            "11 bytes, over kanban.attachment_max_bytes (10)",
        ),
        (vec![id.clone(), at("pipe")], 1, "not a regular file"),
        (vec![id.clone(), "/dev/null".into()], 1, "not a regular file"),
        (vec![id.clone(), dir.to_str().unwrap().into()], 1, "a directory"),
        (vec![id.clone(), at("missing.txt")], 1, "no such file"),
        (vec!["t_00000000".into(), at("small.txt")], 1, "no such task"),
        (
            vec![
                id.clone(),
                at("small.txt"),
                "--content-type".into(),
                "text".into(),
            ],
            1,
            "not a content type",
        ),
        (
            vec![id.clone(), at("small.txt"), "--name".into(), "...".into()],
            1,
            "not a usable file name",
        ),
    ];
    for (args, code, said) in cases {
        let mut all = vec!["attach"];
        all.extend(args.iter().map(String::as_str));
        let (got, _, err) = board.outcome(&all, &[]);
        assert_eq!(got, Some(code), "{args:?}: {err}");
        assert!(err.contains(said) && err.lines().count() == 1, "{args:?}: {err}");
    }
    for (args, said) in [
        (vec!["attach-get", "7", "--out", "x"], "no such attachment: 7"),
        (vec!["attach-rm", "7"], "no such attachment: 7"),
        (vec!["attachments", "t_00000000"], "no such task"),
    ] {
        let (got, _, err) = board.outcome(&args, &[]);
        assert_eq!(got, Some(1), "{args:?}: {err}");
        assert!(err.contains(said) && err.lines().count() == 1, "{args:?}: {err}");
    }
    assert_eq!(board.snapshot(), before);
    // A file that fits lands; --out never overwrites.
    board.ok(&["attach", &id, &at("small.txt")]);
    let (got, _, err) = board.outcome(&["attach-get", "1", "--out", &at("taken.bin")], &[]);
    assert_eq!(got, Some(1), "{err}");
    assert_eq!(std::fs::read(dir.join("taken.bin")).unwrap(), b"mine");
}

/// A worker finds its task's files in its workspace's `attachments/`, and its brief
/// (read through its report channel) names them.
#[test]
fn a_worker_reads_its_tasks_files_from_its_workspace() {
    let script = "kanban complete --result \"$(sha256sum attachments/data.bin | cut -c1-64) \
                  $(kanban context --json | grep -o 'attachments/data.bin' | head -1)\"";
    let profiles = worker_profile("reader", script);
    let mut board = GatewayBoard::new(Setup {
        profiles: &profiles,
        max_spawn: 1,
        ..Setup::default()
    });
    let id = board.create(&[
        "read the file",
        "--assignee",
        "reader",
        "--initial-status",
        "blocked",
    ]);
    let bytes: Vec<u8> = (0..100_000u32).map(|n| (n * 7 % 251) as u8).collect();
    let path = board.path().join("data.bin");
    std::fs::write(&path, &bytes).unwrap();
    board.kanban_ok(&["attach", id.as_str(), path.to_str().unwrap()]);
    board.kanban_ok(&["unblock", id.as_str()]);
    board.start_gateway();
    board.wait_for("the worker done", || board.task(&id).status == Status::Done);
    let task = board.task(&id);
    assert_eq!(
        task.result.as_deref(),
        Some(format!("{} attachments/data.bin", hex(&bytes)).as_str())
    );
}
