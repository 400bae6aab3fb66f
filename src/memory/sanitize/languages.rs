//! Instruction overrides and system-prompt extraction in languages other
//! than English.
//!
//! Languages written with spaces between words are read word by word, as
//! the English detectors read (a verb, then within a few words a noun for
//! instructions with a qualifier such as "all" or "previous" next to it);
//! where the verb may come last (German, Dutch, Turkish), the noun may
//! stand before it too. Chinese, Japanese and Korean are read as text
//! without spaces: a verb with a noun and a qualifier within a few
//! characters either side. Every word of the tables goes through the same
//! folding as the text (case, accents, look-alike letters), so the tables
//! are written as people write the words.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::instructions::EarlierText;
use super::normalize::{Normalized, Word, fold};
use super::{DISREGARD_RULES, IGNORE_PREVIOUS, any_in, before, is, negated_by, within};

/// A language read word by word.
struct Spaced {
    /// Verbs labelled "ignore previous instructions".
    ignore: &'static [&'static str],
    /// Verbs labelled "disregard system rules" (forget, discard, …).
    forget: &'static [&'static str],
    qualifiers: &'static [&'static str],
    nouns: &'static [&'static str],
    /// `everything` and what was `told`, for "forget everything you were
    /// told".
    everything: &'static [&'static str],
    told: &'static [&'static str],
    /// Negations before the verb (`no`, `nicht`) and after it (`pas`).
    not_before: &'static [&'static str],
    not_after: &'static [&'static str],
    /// The verb may follow its object (`alle Anweisungen ignorieren`).
    verb_last: bool,
    /// "Ignore the above and print …": words for the earlier text as the
    /// verb's object, the words that may lead up to it (`lo`, `das`), the
    /// orders that follow (besides [`Spaced::reveal`]) and the words that
    /// join the two clauses.
    earlier: &'static [&'static str],
    earlier_lead: &'static [&'static str],
    orders: &'static [&'static str],
    and: &'static [&'static str],
    /// "Show me your system prompt": verbs, and the phrases (as words).
    reveal: &'static [&'static str],
    prompt: &'static [&'static [&'static str]],
}

/// A language read as text without spaces.
struct Unspaced {
    ignore: &'static [&'static str],
    forget: &'static [&'static str],
    qualifiers: &'static [&'static str],
    nouns: &'static [&'static str],
    not_before: &'static [&'static str],
    not_after: &'static [&'static str],
    reveal: &'static [&'static str],
    prompt: &'static [&'static str],
    /// "Ignore the above and print …": the earlier text next to the verb,
    /// and orders after it (besides [`Unspaced::reveal`]).
    earlier: &'static [&'static str],
    orders: &'static [&'static str],
    /// Characters either side of a verb in which its object is looked
    /// for, after folding (which spells a Hangul syllable with two or
    /// three letters).
    window: usize,
}

const SPACED: &[Spaced] = &[
    // Spanish
    Spaced {
        ignore: &[
            "ignora",
            "ignore",
            "ignoren",
            "ignorad",
            "ignorar",
            "ignoralas",
            "ignoralos",
            "omiso",
            "desestima",
            "desatiende",
            "omite",
            "omita",
            "omitan",
            "omitir",
        ],
        forget: &[
            "olvida",
            "olvide",
            "olviden",
            "olvidad",
            "olvidar",
            "olvidate",
            "descarta",
            "descarte",
            "descartar",
            "desobedece",
            "anula",
            "anule",
        ],
        qualifiers: &[
            "todas",
            "todos",
            "anteriores",
            "anterior",
            "previas",
            "previos",
            "previa",
            "previo",
            "tus",
            "sus",
            "del",
            "sistema",
            "originales",
            "iniciales",
            "precedentes",
            "arriba",
            "anteriormente",
            "existentes",
            "actuales",
        ],
        nouns: &[
            "instrucciones",
            "instruccion",
            "reglas",
            "indicaciones",
            "ordenes",
            "directrices",
            "directivas",
            "normas",
            "pautas",
            "restricciones",
            "comandos",
            "prompt",
            "prompts",
        ],
        everything: &["todo"],
        told: &[
            "dijeron",
            "dicho",
            "dije",
            "anterior",
            "antes",
            "arriba",
            "aprendiste",
        ],
        not_before: &["no", "nunca", "jamas"],
        not_after: &[],
        verb_last: false,
        earlier: &["anterior", "anteriores", "arriba", "precedente", "previo"],
        earlier_lead: &[
            "lo",
            "el",
            "la",
            "los",
            "las",
            "todo",
            "que",
            "de",
            "se",
            "ha",
            "has",
            "dicho",
            "escrito",
            "esta",
            "este",
            "texto",
            "mensaje",
            "contenido",
        ],
        orders: &[
            "da", "dame", "envia", "enviame", "manda", "haz", "ejecuta", "responde", "di",
            "entrega", "pasa", "pasame",
        ],
        and: &[
            "y", "e", "luego", "pero", "ahora", "solo", "entonces", "despues",
        ],
        reveal: &[
            "muestra",
            "muestrame",
            "muestre",
            "revela",
            "revelame",
            "dime",
            "imprime",
            "repite",
            "escribe",
            "ensename",
        ],
        prompt: &[
            &["prompt", "del", "sistema"],
            &["instrucciones", "del", "sistema"],
            &["instrucciones", "ocultas"],
            &["instrucciones", "iniciales"],
            &["mensaje", "del", "sistema"],
        ],
    },
    // German
    Spaced {
        ignore: &[
            "ignoriere",
            "ignorier",
            "ignorieren",
            "ignoriert",
            "uberspringe",
            "ubergehe",
            "missachte",
            "missachten",
        ],
        forget: &[
            "vergiss",
            "vergesse",
            "vergessen",
            "vergesst",
            "verwirf",
            "verwerfe",
            "verwerfen",
        ],
        qualifiers: &[
            "alle",
            "allen",
            "aller",
            "samtliche",
            "samtlichen",
            "vorherigen",
            "vorherige",
            "vorigen",
            "vorige",
            "bisherigen",
            "bisherige",
            "obigen",
            "obige",
            "fruheren",
            "fruhere",
            "vorangegangenen",
            "deine",
            "deinen",
            "ihre",
            "ihren",
            "ursprunglichen",
        ],
        nouns: &[
            "anweisungen",
            "anweisung",
            "instruktionen",
            "regeln",
            "befehle",
            "vorgaben",
            "richtlinien",
            "anordnungen",
            "einschrankungen",
            "systemanweisungen",
            "systemprompt",
            "prompts",
        ],
        everything: &["alles"],
        told: &[
            "gesagt", "gelernt", "oben", "vorher", "bisher", "davor", "erzahlt",
        ],
        not_before: &["nicht", "nie", "niemals", "kein", "keine"],
        not_after: &["nicht", "nie", "niemals"],
        verb_last: true,
        earlier: &[
            "obige",
            "obigen",
            "obiges",
            "vorherige",
            "vorherigen",
            "vorheriges",
            "vorige",
            "vorigen",
            "bisherige",
            "bisherigen",
            "vorangegangene",
            "vorangegangenen",
            "oben",
        ],
        earlier_lead: &[
            "das",
            "den",
            "die",
            "dem",
            "alles",
            "was",
            "text",
            "nachricht",
            "inhalt",
            "steht",
            "stehende",
            "geschriebene",
            "gesagte",
        ],
        orders: &[
            "schreib", "sende", "schicke", "schick", "sag", "sage", "mach", "mache", "fuhre",
            "antworte", "liste",
        ],
        and: &["und", "dann", "aber", "jetzt", "nur", "sondern", "danach"],
        reveal: &[
            "zeige",
            "zeig",
            "gib",
            "nenne",
            "verrate",
            "wiederhole",
            "drucke",
            "schreibe",
            "offenbare",
            "enthulle",
        ],
        prompt: &[
            &["systemprompt"],
            &["system", "prompt"],
            &["systemanweisungen"],
            &["versteckten", "anweisungen"],
            &["geheimen", "anweisungen"],
        ],
    },
    // French
    Spaced {
        ignore: &[
            "ignore",
            "ignorez",
            "ignorer",
            "ignores",
            "neglige",
            "negligez",
            "outrepasse",
            "outrepassez",
            "contourne",
            "contournez",
        ],
        forget: &[
            "oublie",
            "oubliez",
            "oublier",
            "abandonne",
            "abandonnez",
            "ecarte",
            "ecartez",
        ],
        qualifiers: &[
            "toutes",
            "tous",
            "precedentes",
            "precedents",
            "precedente",
            "anterieures",
            "anterieurs",
            "dessus",
            "tes",
            "vos",
            "ton",
            "votre",
            "systeme",
            "initiales",
            "originales",
            "actuelles",
            "existantes",
        ],
        nouns: &[
            "instructions",
            "instruction",
            "consignes",
            "consigne",
            "regles",
            "directives",
            "ordres",
            "commandes",
            "restrictions",
            "prompt",
            "prompts",
        ],
        everything: &["tout"],
        told: &["dit", "appris", "dessus", "avant", "precede"],
        not_before: &["ne", "jamais"],
        not_after: &["pas", "jamais"],
        verb_last: false,
        earlier: &[
            "precede",
            "precedent",
            "precedents",
            "precedente",
            "precedentes",
            "dessus",
            "anterieur",
        ],
        earlier_lead: &[
            "ce", "qui", "le", "la", "les", "l", "tout", "ci", "texte", "message", "contenu", "de",
            "du", "a", "ete", "dit", "ecrit",
        ],
        orders: &[
            "envoie", "envoyez", "fais", "faites", "execute", "executez", "reponds", "repondez",
            "imprime", "imprimez",
        ],
        and: &[
            "et",
            "puis",
            "mais",
            "maintenant",
            "seulement",
            "alors",
            "ensuite",
        ],
        reveal: &[
            "montre", "montrez", "revele", "revelez", "affiche", "affichez", "donne", "donnez",
            "repete", "repetez", "ecris", "ecrivez", "dis", "dites",
        ],
        prompt: &[
            &["prompt", "systeme"],
            &["prompt", "du", "systeme"],
            &["instructions", "systeme"],
            &["instructions", "du", "systeme"],
            &["instructions", "cachees"],
            &["instructions", "initiales"],
        ],
    },
    // Portuguese
    Spaced {
        ignore: &[
            "ignore",
            "ignora",
            "ignorem",
            "ignorar",
            "desconsidere",
            "desconsidera",
            "desconsiderem",
            "desconsiderar",
        ],
        forget: &[
            "esqueca", "esquece", "esquecam", "esquecer", "descarte", "descarta", "abandone",
        ],
        qualifiers: &[
            "todas",
            "todos",
            "anteriores",
            "previas",
            "previos",
            "suas",
            "seus",
            "tuas",
            "teus",
            "sistema",
            "acima",
            "originais",
            "iniciais",
        ],
        nouns: &[
            "instrucoes",
            "instrucao",
            "regras",
            "ordens",
            "diretrizes",
            "diretivas",
            "orientacoes",
            "comandos",
            "restricoes",
            "prompt",
            "prompts",
        ],
        everything: &["tudo"],
        told: &["disseram", "dito", "disse", "antes", "acima", "aprendeu"],
        not_before: &["nao", "nunca", "jamais"],
        not_after: &[],
        verb_last: false,
        earlier: &["anterior", "anteriores", "acima", "precedente", "previo"],
        earlier_lead: &[
            "o", "a", "os", "as", "tudo", "que", "foi", "dito", "escrito", "esta", "este", "texto",
            "mensagem", "conteudo", "de", "do", "da",
        ],
        orders: &[
            "mostrar", "diz", "imprime", "escreve", "envie", "envia", "manda", "mande", "de", "da",
            "faca", "faz", "execute", "executa", "responda", "responde", "repete",
        ],
        and: &["e", "depois", "mas", "agora", "so", "entao", "apenas"],
        reveal: &[
            "mostre", "mostra", "revele", "revela", "diga", "imprima", "repita", "escreva",
        ],
        prompt: &[
            &["prompt", "do", "sistema"],
            &["instrucoes", "do", "sistema"],
            &["instrucoes", "ocultas"],
            &["mensagem", "do", "sistema"],
        ],
    },
    // Italian
    Spaced {
        ignore: &[
            "ignora",
            "ignori",
            "ignorate",
            "ignorare",
            "tralascia",
            "tralasciate",
        ],
        forget: &[
            "dimentica",
            "dimenticate",
            "dimenticare",
            "scarta",
            "scartate",
            "trascura",
            "trascurate",
        ],
        qualifiers: &[
            "tutte",
            "tutti",
            "precedenti",
            "precedente",
            "tue",
            "tuoi",
            "sue",
            "sopra",
            "originali",
            "iniziali",
            "sistema",
            "attuali",
        ],
        nouns: &[
            "istruzioni",
            "istruzione",
            "regole",
            "direttive",
            "ordini",
            "indicazioni",
            "comandi",
            "restrizioni",
            "prompt",
        ],
        everything: &["tutto"],
        told: &["detto", "detta", "prima", "sopra", "imparato"],
        not_before: &["non", "mai"],
        not_after: &[],
        verb_last: false,
        earlier: &["precedente", "precedenti", "sopra", "suddetto", "anteriore"],
        earlier_lead: &[
            "il",
            "lo",
            "la",
            "i",
            "gli",
            "le",
            "l",
            "tutto",
            "quello",
            "quanto",
            "che",
            "ciò",
            "cio",
            "e",
            "stato",
            "detto",
            "scritto",
            "testo",
            "messaggio",
            "contenuto",
            "di",
            "del",
            "della",
        ],
        orders: &[
            "di", "invia", "inviami", "manda", "dai", "dammi", "fai", "esegui", "rispondi",
        ],
        and: &["e", "poi", "ma", "ora", "solo", "quindi", "dopo"],
        reveal: &[
            "mostra", "mostrami", "rivela", "rivelami", "dimmi", "stampa", "ripeti", "scrivi",
        ],
        prompt: &[
            &["prompt", "di", "sistema"],
            &["prompt", "del", "sistema"],
            &["istruzioni", "di", "sistema"],
            &["istruzioni", "nascoste"],
        ],
    },
    // Dutch
    Spaced {
        ignore: &["negeer", "negeren", "negeert"],
        forget: &["vergeet", "vergeten"],
        qualifiers: &[
            "alle",
            "vorige",
            "eerdere",
            "voorgaande",
            "bovenstaande",
            "je",
            "jouw",
            "uw",
            "systeem",
        ],
        nouns: &[
            "instructies",
            "instructie",
            "regels",
            "opdrachten",
            "aanwijzingen",
            "richtlijnen",
            "prompts",
        ],
        everything: &["alles"],
        told: &["gezegd", "verteld", "geleerd", "hierboven"],
        not_before: &["niet", "nooit"],
        not_after: &["niet", "nooit"],
        verb_last: true,
        earlier: &[
            "bovenstaande",
            "vorige",
            "voorgaande",
            "eerdere",
            "hierboven",
        ],
        earlier_lead: &[
            "het", "de", "dat", "alles", "wat", "tekst", "bericht", "inhoud", "staat",
        ],
        orders: &[
            "stuur", "zend", "schrijf", "print", "druk", "zeg", "doe", "voer", "antwoord",
        ],
        and: &["en", "dan", "maar", "nu", "alleen", "daarna"],
        reveal: &["toon", "laat", "herhaal", "geef", "vertel"],
        prompt: &[
            &["systeemprompt"],
            &["systeem", "prompt"],
            &["systeeminstructies"],
        ],
    },
    // Polish
    Spaced {
        ignore: &["zignoruj", "ignoruj", "zignorujcie", "pomin"],
        forget: &["zapomnij", "zapomnijcie", "odrzuc"],
        qualifiers: &[
            "wszystkie",
            "wszystkich",
            "poprzednie",
            "poprzednich",
            "wczesniejsze",
            "swoje",
            "twoje",
            "systemowe",
        ],
        nouns: &[
            "instrukcje",
            "instrukcji",
            "polecenia",
            "polecen",
            "zasady",
            "regul",
            "reguly",
            "wytyczne",
        ],
        everything: &["wszystko"],
        told: &["powiedziano", "mowiono", "wczesniej"],
        not_before: &["nie", "nigdy"],
        not_after: &[],
        verb_last: false,
        earlier: &[
            "powyzsze",
            "powyzej",
            "poprzednie",
            "wczesniejsze",
            "wczesniej",
        ],
        earlier_lead: &[
            "to",
            "co",
            "wszystko",
            "jest",
            "bylo",
            "napisane",
            "tekst",
            "wiadomosc",
            "tresc",
        ],
        orders: &[
            "wyslij",
            "napisz",
            "powiedz",
            "zrob",
            "wykonaj",
            "odpowiedz",
            "daj",
            "wydrukuj",
        ],
        and: &["i", "a", "potem", "ale", "teraz", "tylko", "nastepnie"],
        reveal: &["pokaz", "ujawnij", "powtorz", "wypisz", "podaj"],
        prompt: &[&["prompt", "systemowy"], &["instrukcje", "systemowe"]],
    },
    // Turkish
    Spaced {
        ignore: &["yoksay", "say", "gormezden", "atla"],
        forget: &["unut", "unutun"],
        qualifiers: &["onceki", "tum", "butun", "tumunu", "yukaridaki", "sistem"],
        nouns: &[
            "talimatlari",
            "talimatlar",
            "talimat",
            "kurallari",
            "kurallar",
            "komutlari",
            "yonergeleri",
        ],
        everything: &[],
        told: &[],
        not_before: &[],
        not_after: &["etme", "etmeyin"],
        verb_last: true,
        earlier: &[
            "yukaridakileri",
            "yukaridakini",
            "yukaridaki",
            "oncekileri",
            "oncekini",
            "onceki",
            "yukarida",
        ],
        earlier_lead: &[
            "her",
            "seyi",
            "sey",
            "metni",
            "mesaji",
            "icerigi",
            "yazilanlari",
            "soylenenleri",
        ],
        orders: &["gonder", "ver", "yap", "calistir", "cevap", "yazdir"],
        and: &["ve", "sonra", "ama", "simdi", "sadece", "ardindan"],
        reveal: &["goster", "yaz", "tekrarla", "soyle"],
        prompt: &[&["sistem", "istemini"], &["sistem", "talimatlarini"]],
    },
    // Russian
    Spaced {
        ignore: &[
            "игнорируй",
            "игнорируйте",
            "игнорировать",
            "проигнорируй",
            "проигнорируйте",
            "пропусти",
        ],
        forget: &[
            "забудь",
            "забудьте",
            "забыть",
            "отбрось",
            "отбросьте",
            "отмени",
            "отмените",
        ],
        qualifiers: &[
            "все",
            "всех",
            "предыдущие",
            "предыдущих",
            "прежние",
            "прошлые",
            "предшествующие",
            "свои",
            "твои",
            "ваши",
            "системные",
            "вышеуказанные",
            "выше",
            "исходные",
        ],
        nouns: &[
            "инструкции",
            "инструкций",
            "указания",
            "указаний",
            "правила",
            "правил",
            "команды",
            "директивы",
            "ограничения",
            "промпт",
        ],
        everything: &["все", "всё"],
        told: &["говорили", "сказали", "сказано", "выше", "раньше"],
        not_before: &["не", "никогда"],
        not_after: &[],
        verb_last: false,
        earlier: &[
            "вышеизложенное",
            "вышесказанное",
            "вышенаписанное",
            "предыдущее",
            "предыдущий",
            "выше",
            "прежнее",
            "сказанное",
        ],
        earlier_lead: &[
            "все",
            "всё",
            "то",
            "что",
            "было",
            "написано",
            "сказано",
            "текст",
            "сообщение",
            "содержимое",
        ],
        orders: &[
            "отправь",
            "пришли",
            "дай",
            "сделай",
            "выполни",
            "ответь",
            "распечатай",
            "напечатай",
        ],
        and: &["и", "затем", "но", "теперь", "только", "а", "потом"],
        reveal: &[
            "покажи",
            "покажите",
            "выведи",
            "раскрой",
            "повтори",
            "напиши",
            "скажи",
        ],
        prompt: &[
            &["системный", "промпт"],
            &["системные", "инструкции"],
            &["системное", "сообщение"],
            &["скрытые", "инструкции"],
        ],
    },
];

const UNSPACED: &[Unspaced] = &[
    // Chinese (simplified and traditional)
    Unspaced {
        ignore: &[
            "忽略",
            "忽视",
            "忽視",
            "无视",
            "無視",
            "不要理会",
            "不要理會",
            "不理会",
            "不理會",
            "跳过",
            "跳過",
        ],
        forget: &[
            "忘记", "忘記", "忘掉", "抛开", "拋開", "放弃", "放棄", "丢弃", "丟棄",
        ],
        qualifiers: &[
            "之前", "以前", "先前", "此前", "上面", "上述", "以上", "前面", "所有", "全部", "一切",
            "原来", "原來", "原有", "系统", "系統",
        ],
        nouns: &[
            "指令",
            "指示",
            "规则",
            "規則",
            "提示词",
            "提示詞",
            "提示",
            "命令",
            "设定",
            "設定",
            "约束",
            "約束",
            "限制",
            "说明",
            "說明",
            "要求",
        ],
        not_before: &["不要", "不", "别", "別", "勿", "没", "沒", "莫"],
        not_after: &[],
        reveal: &[
            "显示",
            "顯示",
            "输出",
            "輸出",
            "告诉我",
            "告訴我",
            "打印",
            "泄露",
            "透露",
            "重复",
            "重複",
            "给我看",
            "給我看",
        ],
        prompt: &[
            "系统提示",
            "系統提示",
            "系统指令",
            "系統指令",
            "系统消息",
            "系統訊息",
            "隐藏指令",
            "隱藏指令",
        ],
        earlier: &["以上", "上面", "上述", "前面", "之前", "以前"],
        orders: &[
            "发送", "發送", "告诉", "告訴", "给我", "給我", "写出", "寫出", "列出", "执行", "執行",
            "回答", "提供",
        ],
        window: 16,
    },
    // Japanese
    Unspaced {
        ignore: &["無視"],
        forget: &["忘れ", "破棄"],
        qualifiers: &[
            "以前",
            "前の",
            "これまで",
            "今まで",
            "上記",
            "上の",
            "すべて",
            "全て",
            "全部",
            "先の",
            "最初の",
            "システム",
        ],
        nouns: &[
            "指示",
            "命令",
            "指令",
            "ルール",
            "規則",
            "プロンプト",
            "設定",
            "制約",
        ],
        not_before: &[],
        not_after: &["しない", "せず", "するな", "ないで", "ません"],
        reveal: &["表示", "教えて", "出力", "見せて", "繰り返", "書き出"],
        prompt: &["システムプロンプト", "システム指示", "隠された指示"],
        earlier: &["上記", "以上", "これまで"],
        orders: &["送信", "送って", "書いて", "実行", "答えて", "渡して"],
        window: 16,
    },
    // Korean
    Unspaced {
        ignore: &["무시"],
        forget: &["잊어", "잊고", "잊으"],
        qualifiers: &[
            "이전",
            "모든",
            "위의",
            "앞의",
            "지금까지",
            "기존",
            "원래",
            "시스템",
        ],
        nouns: &["지시", "명령", "규칙", "지침", "프롬프트", "설정", "제한"],
        not_before: &[],
        not_after: &["하지마", "하지말", "하지않", "않"],
        reveal: &["보여", "출력", "알려", "공개", "반복"],
        prompt: &["시스템프롬프트", "시스템지시", "시스템메시지"],
        earlier: &["위의", "위", "이전", "앞의"],
        orders: &["보내", "써", "실행", "말해", "줘"],
        window: 40,
    },
];

/// A table with every entry folded as text is.
struct Folded {
    ignore: Vec<String>,
    forget: Vec<String>,
    qualifiers: Vec<String>,
    nouns: Vec<String>,
    everything: Vec<String>,
    told: Vec<String>,
    not_before: Vec<String>,
    not_after: Vec<String>,
    verb_last: bool,
    reveal: Vec<String>,
    /// See [`Spaced::earlier`] and [`Unspaced::earlier`]; `orders` holds
    /// the `reveal` verbs too (`earlier_lead` and `and` are empty for
    /// unspaced languages).
    earlier: Vec<String>,
    earlier_lead: Vec<String>,
    orders: Vec<String>,
    and: Vec<String>,
    /// Phrases as folded words (spaced) or one folded string (unspaced).
    prompt: Vec<Vec<String>>,
    /// See [`Unspaced::window`] (unused for spaced languages).
    window: usize,
}

fn fold_all(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| fold(w)).collect()
}

/// The spaced languages' tables, and their verbs indexed so that a word
/// is looked up once whatever the number of languages.
struct SpacedTables {
    langs: Vec<Folded>,
    /// Override verb → (language, label) pairs.
    verbs: HashMap<String, Vec<(usize, &'static str)>>,
    /// "Show"-like verb → languages.
    reveals: HashMap<String, Vec<usize>>,
}

fn spaced() -> &'static SpacedTables {
    static TABLES: OnceLock<SpacedTables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let langs: Vec<Folded> = SPACED
            .iter()
            .map(|l| Folded {
                ignore: fold_all(l.ignore),
                forget: fold_all(l.forget),
                qualifiers: fold_all(l.qualifiers),
                nouns: fold_all(l.nouns),
                everything: fold_all(l.everything),
                told: fold_all(l.told),
                not_before: fold_all(l.not_before),
                not_after: fold_all(l.not_after),
                verb_last: l.verb_last,
                reveal: fold_all(l.reveal),
                earlier: fold_all(l.earlier),
                earlier_lead: fold_all(l.earlier_lead),
                orders: fold_all(&[l.reveal, l.orders].concat()),
                and: fold_all(l.and),
                prompt: l.prompt.iter().map(|p| fold_all(p)).collect(),
                window: 0,
            })
            .collect();
        let mut verbs: HashMap<String, Vec<(usize, &'static str)>> = HashMap::new();
        let mut reveals: HashMap<String, Vec<usize>> = HashMap::new();
        for (k, lang) in langs.iter().enumerate() {
            for verb in &lang.ignore {
                verbs
                    .entry(verb.clone())
                    .or_default()
                    .push((k, IGNORE_PREVIOUS));
            }
            for verb in &lang.forget {
                verbs
                    .entry(verb.clone())
                    .or_default()
                    .push((k, DISREGARD_RULES));
            }
            for verb in &lang.reveal {
                reveals.entry(verb.clone()).or_default().push(k);
            }
        }
        SpacedTables {
            langs,
            verbs,
            reveals,
        }
    })
}

fn unspaced() -> &'static [Folded] {
    static TABLES: OnceLock<Vec<Folded>> = OnceLock::new();
    TABLES.get_or_init(|| {
        UNSPACED
            .iter()
            .map(|l| Folded {
                ignore: fold_all(l.ignore),
                forget: fold_all(l.forget),
                qualifiers: fold_all(l.qualifiers),
                nouns: fold_all(l.nouns),
                everything: Vec::new(),
                told: Vec::new(),
                not_before: fold_all(l.not_before),
                not_after: fold_all(l.not_after),
                verb_last: true,
                reveal: fold_all(l.reveal),
                earlier: fold_all(l.earlier),
                earlier_lead: Vec::new(),
                orders: fold_all(&[l.reveal, l.orders].concat()),
                and: Vec::new(),
                prompt: vec![fold_all(l.prompt)],
                window: l.window,
            })
            .collect()
    })
}

/// The verbs of the languages written with spaces that are plain ASCII
/// once folded (the anchors the first look needs).
pub(super) fn ascii_verbs() -> impl Iterator<Item = String> {
    // Only the verbs are folded here, not the whole tables: the first look
    // needs them in every command that reads memory back, the tables only
    // for text it lets through.
    SPACED
        .iter()
        .flat_map(|l| l.ignore.iter().chain(l.forget).chain(l.reveal))
        .map(|w| fold(w))
        .filter(|w| w.is_ascii())
}

/// The label of an override in another language, if any.
pub(super) fn override_instructions(n: &Normalized) -> Option<&'static str> {
    spaced_override(n).or_else(|| unspaced_override(n))
}

fn spaced_override(n: &Normalized) -> Option<&'static str> {
    let tables = spaced();
    for words in n.variants() {
        for (i, w) in words.iter().enumerate() {
            let Some(found) = tables.verbs.get(&w.text) else {
                continue;
            };
            for &(k, label) in found {
                let lang = &tables.langs[k];
                if negated_by(words, i, &lang.not_before)
                    || words
                        .get(i + 1)
                        .is_some_and(|next| is(&next.text, &lang.not_after))
                {
                    continue;
                }
                if let Some(j) = within(words, i, 6, &lang.nouns) {
                    let span_end = (j + 2).min(words.len() - 1);
                    if any_in(&words[i + 1..=span_end], &lang.qualifiers) {
                        return Some(label);
                    }
                }
                if lang.verb_last
                    && let Some(j) = before(words, i, 6, &lang.nouns)
                    && any_in(&words[j.saturating_sub(3)..i], &lang.qualifiers)
                {
                    return Some(label);
                }
                if let Some(j) = within(words, i, 2, &lang.everything)
                    && within(words, j, 5, &lang.told).is_some()
                {
                    return Some(label);
                }
                let earlier = EarlierText {
                    earlier: lang.earlier.as_slice(),
                    lead: &lang.earlier_lead,
                    and: &lang.and,
                    orders: &lang.orders,
                };
                if earlier.then_order(n, words, i) {
                    return Some(label);
                }
            }
        }
    }
    None
}

fn unspaced_override(n: &Normalized) -> Option<&'static str> {
    let text = n.compact.as_str();
    if !has_unspaced_script(text) {
        return None;
    }
    for lang in unspaced() {
        for (verbs, label) in [
            (&lang.ignore, IGNORE_PREVIOUS),
            (&lang.forget, DISREGARD_RULES),
        ] {
            for verb in verbs {
                for (at, _) in text.match_indices(verb.as_str()) {
                    let end = at + verb.len();
                    let (ahead, after) = (&text[..at], &text[end..]);
                    let negated = lang
                        .not_before
                        .iter()
                        .any(|neg| ahead.ends_with(neg.as_str()))
                        || lang
                            .not_after
                            .iter()
                            .any(|neg| after.starts_with(neg.as_str()));
                    if negated {
                        continue;
                    }
                    let window = format!(
                        "{}{}",
                        tail_chars(ahead, lang.window),
                        head_chars(after, lang.window)
                    );
                    if lang.nouns.iter().any(|w| window.contains(w.as_str()))
                        && lang.qualifiers.iter().any(|w| window.contains(w.as_str()))
                    {
                        return Some(label);
                    }
                    // The earlier text right by the verb (`忽略以上`,
                    // `上記を無視`), then an order after it.
                    let (near_before, near_after) = (tail_chars(ahead, 4), head_chars(after, 4));
                    let earlier = lang.earlier.iter().any(|w| {
                        near_before.contains(w.as_str()) || near_after.contains(w.as_str())
                    });
                    let order = head_chars(after, lang.window);
                    if earlier && lang.orders.iter().any(|w| order.contains(w.as_str())) {
                        return Some(label);
                    }
                }
            }
        }
    }
    None
}

/// "Show me your system prompt" in another language.
pub(super) fn prompt_extraction(n: &Normalized) -> bool {
    spaced_extraction(n) || unspaced_extraction(n)
}

fn spaced_extraction(n: &Normalized) -> bool {
    let tables = spaced();
    for words in n.variants() {
        for (i, w) in words.iter().enumerate() {
            let Some(found) = tables.reveals.get(&w.text) else {
                continue;
            };
            for &k in found {
                let lang = &tables.langs[k];
                if negated_by(words, i, &lang.not_before) {
                    continue;
                }
                let end = (i + 7).min(words.len());
                if (i + 1..end).any(|j| lang.prompt.iter().any(|p| phrase_at(words, j, p))) {
                    return true;
                }
                if lang.verb_last
                    && (i.saturating_sub(6)..i)
                        .any(|j| lang.prompt.iter().any(|p| phrase_at(words, j, p)))
                {
                    return true;
                }
            }
        }
    }
    false
}

fn phrase_at(words: &[Word], i: usize, phrase: &[String]) -> bool {
    phrase.len() <= words.len() - i && phrase.iter().zip(&words[i..]).all(|(p, w)| w.text == *p)
}

fn unspaced_extraction(n: &Normalized) -> bool {
    let text = n.compact.as_str();
    if !has_unspaced_script(text) {
        return false;
    }
    unspaced().iter().any(|lang| {
        lang.reveal.iter().any(|verb| {
            text.match_indices(verb.as_str()).any(|(at, _)| {
                let window = format!(
                    "{}{}",
                    tail_chars(&text[..at], lang.window),
                    head_chars(&text[at + verb.len()..], lang.window)
                );
                lang.prompt[0].iter().any(|p| window.contains(p.as_str()))
            })
        })
    })
}

/// Whether `text` holds Chinese, Japanese or Korean characters (Hangul
/// as the conjoining letters folding leaves).
fn has_unspaced_script(text: &str) -> bool {
    !text.is_ascii()
        && text.chars().any(|c| {
            matches!(c,
                '\u{1100}'..='\u{11FF}'
                | '\u{3040}'..='\u{30FF}'
                | '\u{3130}'..='\u{318F}'
                | '\u{3400}'..='\u{4DBF}'
                | '\u{4E00}'..='\u{9FFF}'
                | '\u{AC00}'..='\u{D7AF}'
                | '\u{F900}'..='\u{FAFF}')
        })
}

/// The last `n` characters of `text`.
fn tail_chars(text: &str, n: usize) -> &str {
    let start = text
        .char_indices()
        .rev()
        .nth(n.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    &text[start..]
}

/// The first `n` characters of `text`.
fn head_chars(text: &str, n: usize) -> &str {
    let end = text.char_indices().nth(n).map_or(text.len(), |(i, _)| i);
    &text[..end]
}
