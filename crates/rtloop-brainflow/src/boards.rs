//! Board names and ids as BrainFlow spells them (`BoardIds`), the options each board needs,
//! and BrainFlow's input parameters (`BrainFlowInputParams`) as the JSON its C API takes.

use crate::BrainFlowError;

/// Every board id BrainFlow 5.x knows, by its `BoardIds` name.
pub const BOARDS: &[(&str, i32)] = &[
    ("PLAYBACK_FILE_BOARD", -3),
    ("STREAMING_BOARD", -2),
    ("SYNTHETIC_BOARD", -1),
    ("CYTON_BOARD", 0),
    ("GANGLION_BOARD", 1),
    ("CYTON_DAISY_BOARD", 2),
    ("GALEA_BOARD", 3),
    ("GANGLION_WIFI_BOARD", 4),
    ("CYTON_WIFI_BOARD", 5),
    ("CYTON_DAISY_WIFI_BOARD", 6),
    ("BRAINBIT_BOARD", 7),
    ("UNICORN_BOARD", 8),
    ("CALLIBRI_EEG_BOARD", 9),
    ("CALLIBRI_EMG_BOARD", 10),
    ("CALLIBRI_ECG_BOARD", 11),
    ("NOTION_1_BOARD", 13),
    ("NOTION_2_BOARD", 14),
    ("GFORCE_PRO_BOARD", 16),
    ("FREEEEG32_BOARD", 17),
    ("BRAINBIT_BLED_BOARD", 18),
    ("GFORCE_DUAL_BOARD", 19),
    ("MUSE_S_BLED_BOARD", 21),
    ("MUSE_2_BLED_BOARD", 22),
    ("CROWN_BOARD", 23),
    ("ANT_NEURO_EE_410_BOARD", 24),
    ("ANT_NEURO_EE_411_BOARD", 25),
    ("ANT_NEURO_EE_430_BOARD", 26),
    ("ANT_NEURO_EE_211_BOARD", 27),
    ("ANT_NEURO_EE_212_BOARD", 28),
    ("ANT_NEURO_EE_213_BOARD", 29),
    ("ANT_NEURO_EE_214_BOARD", 30),
    ("ANT_NEURO_EE_215_BOARD", 31),
    ("ANT_NEURO_EE_221_BOARD", 32),
    ("ANT_NEURO_EE_222_BOARD", 33),
    ("ANT_NEURO_EE_223_BOARD", 34),
    ("ANT_NEURO_EE_224_BOARD", 35),
    ("ANT_NEURO_EE_225_BOARD", 36),
    ("ENOPHONE_BOARD", 37),
    ("MUSE_2_BOARD", 38),
    ("MUSE_S_BOARD", 39),
    ("BRAINALIVE_BOARD", 40),
    ("MUSE_2016_BOARD", 41),
    ("MUSE_2016_BLED_BOARD", 42),
    ("EXPLORE_4_CHAN_BOARD", 44),
    ("EXPLORE_8_CHAN_BOARD", 45),
    ("GANGLION_NATIVE_BOARD", 46),
    ("EMOTIBIT_BOARD", 47),
    ("NTL_WIFI_BOARD", 50),
    ("ANT_NEURO_EE_511_BOARD", 51),
    ("FREEEEG128_BOARD", 52),
    ("AAVAA_V3_BOARD", 53),
    ("EXPLORE_PLUS_8_CHAN_BOARD", 54),
    ("EXPLORE_PLUS_32_CHAN_BOARD", 55),
    ("PIEEG_BOARD", 56),
    ("NEUROPAWN_KNIGHT_BOARD", 57),
    ("SYNCHRONI_TRIO_3_CHANNELS_BOARD", 58),
    ("SYNCHRONI_OCTO_8_CHANNELS_BOARD", 59),
    ("OB5000_8_CHANNELS_BOARD", 60),
    ("SYNCHRONI_PENTO_8_CHANNELS_BOARD", 61),
    ("SYNCHRONI_UNO_1_CHANNELS_BOARD", 62),
    ("OB3000_24_CHANNELS_BOARD", 63),
    ("BIOLISTENER_BOARD", 64),
    ("IRONBCI_32_BOARD", 65),
    ("NEUROPAWN_KNIGHT_BOARD_IMU", 66),
    ("MUSE_S_ATHENA_BOARD", 67),
    ("SHIMMER3_BOARD", 68),
];

/// `PLAYBACK_FILE_BOARD`: plays a file BrainFlow wrote (`DataFilter.write_file`, a streamer).
pub const PLAYBACK_FILE_BOARD: i32 = -3;
/// `STREAMING_BOARD`: receives what another BrainFlow session multicasts.
pub const STREAMING_BOARD: i32 = -2;
/// `SYNTHETIC_BOARD`: generated data, no hardware.
pub const SYNTHETIC_BOARD: i32 = -1;

/// A board: its id and its name as BrainFlow spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Board {
    /// BrainFlow's board id.
    pub id: i32,
    /// Its `BoardIds` name (`SYNTHETIC_BOARD`), or `BOARD_<id>` for an id this table lacks.
    pub name: &'static str,
}

impl std::fmt::Display for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.id)
    }
}

fn key(s: &str) -> String {
    let up = s.trim().to_ascii_uppercase().replace(['-', ' '], "_");
    up.strip_suffix("_BOARD").map_or(up.clone(), str::to_string)
}

impl Board {
    /// A board by name as BrainFlow spells it, case-insensitively, with or without `_BOARD`
    /// and with `-` for `_` (`SYNTHETIC_BOARD`, `synthetic`, `cyton-daisy`), or by its numeric
    /// id (`-1`, `0`).
    pub fn parse(text: &str) -> Result<Board, BrainFlowError> {
        if let Ok(id) = text.trim().parse::<i32>() {
            return Board::from_id(id).ok_or_else(|| unknown(text));
        }
        let k = key(text);
        BOARDS
            .iter()
            .find(|(n, _)| key(n) == k)
            .map(|&(name, id)| Board { id, name })
            .ok_or_else(|| unknown(text))
    }

    /// The board of a BrainFlow id, if BrainFlow has it.
    #[must_use]
    pub fn from_id(id: i32) -> Option<Board> {
        BOARDS
            .iter()
            .find(|(_, i)| *i == id)
            .map(|&(name, id)| Board { id, name })
    }

    /// Its short name for stream names: `synthetic`, `cyton_daisy`.
    #[must_use]
    pub fn short(&self) -> String {
        key(self.name).to_ascii_lowercase()
    }

    /// The options this board cannot start without, and what each is for.
    #[must_use]
    pub fn required(&self) -> &'static [(Opt, &'static str)] {
        use Opt::{File, IpAddress, IpPort, MacAddress, MasterBoard, SerialPort};
        match self.id {
            // OpenBCI over the USB dongle, BLED112 dongles, USB and serial boards
            0 | 2 | 17 | 52 | 57 | 65 | 66 | 68 => {
                &[(SerialPort, "the board's serial port, e.g. /dev/ttyUSB0")]
            }
            1 | 18 | 21 | 22 | 42 => &[(
                SerialPort,
                "the BLED112 dongle's serial port, e.g. /dev/ttyACM0",
            )],
            // the OpenBCI WiFi shield connects back to a local TCP port
            4..=6 => &[(
                IpPort,
                "a free local port the WiFi shield sends to, e.g. 6789",
            )],
            // Bluetooth boards Linux cannot discover by themselves
            37 | 44 | 45 | 54 | 55 => &[(
                MacAddress,
                "the paired device's Bluetooth address (Linux cannot discover it)",
            )],
            PLAYBACK_FILE_BOARD => &[
                (
                    File,
                    "the file to play (BrainFlow's CSV, e.g. from DataFilter.write_file)",
                ),
                (MasterBoard, "the board that recorded the file"),
            ],
            STREAMING_BOARD => &[
                (
                    IpAddress,
                    "the multicast group the sending session streams to, e.g. 225.1.1.1",
                ),
                (IpPort, "its port, e.g. 6677"),
                (MasterBoard, "the board of the sending session"),
            ],
            _ => &[],
        }
    }
}

fn unknown(text: &str) -> BrainFlowError {
    BrainFlowError::UnknownBoard {
        given: text.to_string(),
        examples: [
            "synthetic (-1)",
            "playback_file (-3)",
            "streaming (-2)",
            "cyton (0)",
            "ganglion (1)",
            "cyton_daisy (2)",
            "cyton_wifi (5)",
            "unicorn (8)",
            "muse_2 (38)",
            "muse_s (39)",
            "emotibit (47)",
        ]
        .join(", "),
        count: BOARDS.len(),
    }
}

/// A BrainFlow input parameter the command line and model files name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    /// `serial_port`
    SerialPort,
    /// `ip_address`
    IpAddress,
    /// `ip_port`
    IpPort,
    /// `mac_address`
    MacAddress,
    /// `file`
    File,
    /// `master_board`
    MasterBoard,
}

impl Opt {
    /// Its command-line spelling.
    #[must_use]
    pub fn flag(self) -> &'static str {
        match self {
            Opt::SerialPort => "--serial-port",
            Opt::IpAddress => "--ip-address",
            Opt::IpPort => "--ip-port",
            Opt::MacAddress => "--mac-address",
            Opt::File => "--file",
            Opt::MasterBoard => "--master-board",
        }
    }
}

/// BrainFlow's input parameters (`BrainFlowInputParams`): which device, where.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Serial port (`/dev/ttyUSB0`): OpenBCI's dongle, BLED112 dongles.
    #[serde(default)]
    pub serial_port: String,
    /// Bluetooth address.
    #[serde(default)]
    pub mac_address: String,
    /// IP address (the WiFi shield, a multicast group).
    #[serde(default)]
    pub ip_address: String,
    /// IP port.
    #[serde(default)]
    pub ip_port: u16,
    /// `tcp` or `udp` (None: the board's own).
    #[serde(default)]
    pub ip_protocol: Option<String>,
    /// Board-specific text (Muse presets, Ganglion firmware).
    #[serde(default)]
    pub other_info: String,
    /// Serial number or device name, to pick one of several devices.
    #[serde(default)]
    pub serial_number: String,
    /// Seconds for discovery and socket operations (0: the board's default).
    #[serde(default)]
    pub timeout: u32,
    /// A file (the playback board).
    #[serde(default)]
    pub file: String,
    /// The board that recorded or streams the data (playback and streaming boards).
    #[serde(default)]
    pub master_board: Option<String>,
}

impl Params {
    /// Check that `board` has what it needs; the master board parsed.
    pub fn check(&self, board: Board) -> Result<Option<Board>, BrainFlowError> {
        for &(opt, why) in board.required() {
            let missing = match opt {
                Opt::SerialPort => self.serial_port.is_empty(),
                Opt::IpAddress => self.ip_address.is_empty(),
                Opt::IpPort => self.ip_port == 0,
                Opt::MacAddress => self.mac_address.is_empty(),
                Opt::File => self.file.is_empty(),
                Opt::MasterBoard => self.master_board.is_none(),
            };
            if missing {
                return Err(BrainFlowError::MissingOption {
                    board: board.to_string(),
                    option: opt.flag(),
                    why,
                });
            }
        }
        if let Some(p) = &self.ip_protocol {
            if p != "tcp" && p != "udp" {
                return Err(BrainFlowError::BadOption(format!(
                    "ip protocol {p:?}: `tcp` or `udp`"
                )));
            }
        }
        match &self.master_board {
            None => Ok(None),
            Some(m) => {
                let mb = Board::parse(m)?;
                if mb.id == PLAYBACK_FILE_BOARD || mb.id == STREAMING_BOARD {
                    return Err(BrainFlowError::BadOption(format!(
                        "master board {mb}: the board that recorded the data, not another \
                         playback or streaming board"
                    )));
                }
                Ok(Some(mb))
            }
        }
    }

    /// The JSON BrainFlow's C API takes (every key present, as BrainFlow's bindings send it).
    #[must_use]
    pub fn to_json(&self, master: Option<Board>) -> String {
        let proto = match self.ip_protocol.as_deref() {
            Some("udp") => 1,
            Some("tcp") => 2,
            _ => 0,
        };
        serde_json::json!({
            "serial_port": self.serial_port,
            "mac_address": self.mac_address,
            "ip_address": self.ip_address,
            "ip_address_aux": "",
            "ip_address_anc": "",
            "ip_port": self.ip_port,
            "ip_port_aux": 0,
            "ip_port_anc": 0,
            "ip_protocol": proto,
            "other_info": self.other_info,
            "timeout": self.timeout,
            "serial_number": self.serial_number,
            "file": self.file,
            "file_aux": "",
            "file_anc": "",
            "master_board": master.map_or(-100, |m| m.id),
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_brainflow_spells_them_any_case_or_the_id() {
        for text in [
            "SYNTHETIC_BOARD",
            "synthetic",
            "Synthetic_Board",
            "-1",
            " synthetic ",
        ] {
            assert_eq!(Board::parse(text).unwrap().id, -1, "{text}");
        }
        assert_eq!(Board::parse("cyton-daisy").unwrap().id, 2);
        assert_eq!(Board::parse("CYTON_BOARD").unwrap().name, "CYTON_BOARD");
        assert_eq!(Board::parse("0").unwrap().short(), "cyton");
        assert_eq!(Board::parse("neuropawn_knight_board_imu").unwrap().id, 66);
    }

    #[test]
    fn an_unknown_board_lists_names_it_could_be() {
        for text in ["cytn", "999", ""] {
            let e = Board::parse(text).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("unknown BrainFlow board {text:?}")),
                "{e}"
            );
            assert!(
                e.contains("synthetic (-1)") && e.contains("cyton (0)"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_board_without_its_required_option_is_refused_naming_it() {
        let cyton = Board::parse("cyton").unwrap();
        let e = Params::default().check(cyton).unwrap_err().to_string();
        assert_eq!(
            e,
            "board CYTON_BOARD (0) needs --serial-port: the board's serial port, e.g. /dev/ttyUSB0"
        );
        let wifi = Board::parse("cyton_wifi").unwrap();
        let e = Params::default().check(wifi).unwrap_err().to_string();
        assert!(e.contains("needs --ip-port"), "{e}");
        let play = Board::parse("playback_file").unwrap();
        let e = Params::default().check(play).unwrap_err().to_string();
        assert!(e.contains("needs --file"), "{e}");
        let p = Params {
            file: "x.csv".into(),
            ..Params::default()
        };
        let e = p.check(play).unwrap_err().to_string();
        assert!(e.contains("needs --master-board"), "{e}");
        let p = Params {
            file: "x.csv".into(),
            master_board: Some("playback".into()),
            ..Params::default()
        };
        assert!(p.check(play).is_err());
        assert!(Params::default()
            .check(Board::parse("synthetic").unwrap())
            .is_ok());
    }

    #[test]
    fn params_become_brainflows_json_with_every_key() {
        let p = Params {
            serial_port: "/dev/ttyUSB0".into(),
            ..Params::default()
        };
        let v: serde_json::Value = serde_json::from_str(&p.to_json(None)).unwrap();
        assert_eq!(v["serial_port"], "/dev/ttyUSB0");
        assert_eq!(v["master_board"], -100);
        assert_eq!(v.as_object().unwrap().len(), 16);
    }
}
