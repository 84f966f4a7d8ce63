"""The shipped trained models load and still earn their cards' scores (nothing is retrained)."""

from __future__ import annotations

import pytest
import torch

import model
from model import TRAINED, VocabTokenizer, load_trained, predict_roles
from train import dates, induction, roles

CARD_KEYS = ("task", "architecture", "config", "steps", "wall_time_s", "final_loss", "scores")


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def nets():
    return {name: load_trained(name) for name in ("dates", "induction", "roles")}


def test_the_three_models_have_cards_with_their_numbers():
    assert set(TRAINED) == {"dates", "induction", "roles"}
    for name, card in TRAINED.items():
        for key in CARD_KEYS:
            assert key in card, (name, key)
        assert card["reproduce"] == f"python -m train {name}"
        assert 3 <= len(card["snapshots"]) <= 5 and card["snapshots"][-1] == card["steps"]
        assert card["wall_time_s"] > 0


def test_a_loaded_model_is_the_card_architecture_in_eval_mode(nets):
    for name, net in nets.items():
        card = TRAINED[name]
        assert not net.training
        assert isinstance(net.tokenizer, VocabTokenizer)
        assert net.config == model.TransformerConfig(**card["config"])
        assert net.config.vocab_size == net.tokenizer.vocab_size < 100
        assert net.get_num_params() == card["parameters"]


def test_dates_held_out_exact_match_and_cross_attention_alignment(nets):
    scores = dates.evaluate(nets["dates"])
    card = TRAINED["dates"]["scores"]
    assert scores["exact_match"] >= 0.99
    assert min(scores["exact_match_per_format"].values()) >= 0.95
    assert scores["exact_match"] == pytest.approx(card["exact_match"], abs=0.005)
    assert scores["cross_alignment"] == pytest.approx(card["cross_alignment"], abs=0.01)
    assert scores["cross_alignment_head"] == card["cross_alignment_head"]
    assert scores["cross_alignment"] >= 0.7


@pytest.mark.parametrize(
    "source",
    ["二〇二六年十一月二十二日", "2026年11月22日", "22 November 2026", "November 22, 2026",
     "Nov 22, 2026", "22 Nov 2026", "22.11.2026", "2026/11/22"],
)  # fmt: skip
def test_dates_writes_22_november_2026_in_every_format(nets, source):
    net = nets["dates"]
    enc = net.tokenizer([source])
    ids = net.generate(enc["input_ids"], max_new_tokens=16, attention_mask=enc["attention_mask"])
    assert ids[0, 0] == net.tokenizer.bos_token_id and ids[0, -1] == net.tokenizer.eos_token_id
    assert net.tokenizer.decode(ids[0]) == "2026-11-22"


def test_induction_copies_the_second_copy_with_its_heads(nets):
    scores = induction.evaluate(nets["induction"])
    card = TRAINED["induction"]["scores"]
    assert scores["in_context_accuracy"] >= 0.95 > 0.3 > scores["first_copy_accuracy"]
    assert scores["probes"] == dict.fromkeys(induction.PROBES, True)  # every probe copied
    assert scores["previous_token_head"]["layer"] == 0  # Olsson et al.: it must come first
    assert scores["induction_head"]["layer"] >= 1
    for key in ("in_context_accuracy", "previous_token_score", "induction_score"):
        assert scores[key] == pytest.approx(card[key], abs=0.01), key
    for key in ("previous_token_head", "previous_token_2_head", "induction_head"):
        assert scores[key]["score"] == pytest.approx(card[key]["score"], abs=0.01), key
        assert (scores[key]["layer"], scores[key]["head"]) == (
            card[key]["layer"],
            card[key]["head"],
        )
    for job, heads in card["heads"].items():  # which heads do what, as the card says
        assert heads, job
        assert [(h["layer"], h["head"]) for h in scores["heads"][job]] == [
            (h["layer"], h["head"]) for h in heads
        ], job


@pytest.mark.parametrize(
    ("typed", "copied"),
    [("qzvkdmwx qzv", "qzvkdmwx qzvkdmwx"), ("mississippi missi", "mississippi mississippi"),
     ("the cat sat the c", "the cat sat the cat sat"), ("qzvkdmqzv", "qzvkdmqzvkdm"),
     ("a1b2c3 a1b", "a1b2c3 a1b2c3")],
)  # fmt: skip
def test_induction_continues_a_text_it_has_seen_once(nets, typed, copied):
    net = nets["induction"]
    prompt = [net.tokenizer.bos_token_id, *net.tokenizer.encode(typed)]
    ids = net.generate(torch.tensor([prompt]), max_new_tokens=len(copied) - len(typed))
    assert net.tokenizer.decode(ids[0]) == copied


def test_induction_reads_other_characters_as_unknown(nets):
    tok = nets["induction"].tokenizer
    assert tok.chars == "abcdefghijklmnopqrstuvwxyz0123456789 "
    assert tok.encode("Hé!") == [tok.unk_token_id] * 3


def test_roles_held_out_accuracy_and_chance_without_positions(nets):
    scores = roles.evaluate(nets["roles"])
    card = TRAINED["roles"]["scores"]
    assert scores["held_out"]["sentence_accuracy"] >= 0.99
    assert scores["swapped_pairs"]["agent_choice_accuracy"] >= 0.99
    # Blind to order, 我喜欢你 and 你喜欢我 get the same answer: exactly one of each pair is right.
    assert scores["swapped_pairs_positions_off"]["agent_choice_accuracy"] == 0.5
    for part in ("held_out", "swapped_pairs", "swapped_pairs_positions_off"):
        assert scores[part]["token_accuracy"] == pytest.approx(
            card[part]["token_accuracy"], abs=0.01
        )


@pytest.mark.parametrize(
    ("text", "agent", "action", "patient"),
    [("我喜欢你", "我", "喜欢", "你"), ("你喜欢我", "你", "喜欢", "我"),
     ("老师很讨厌小明。", "老师", "讨厌", "小明"), ("She helps him.", "She", "helps", "him"),
     ("Anna sees Tom", "Anna", "sees", "Tom")],
)  # fmt: skip
def test_predict_roles_reads_who_did_what_to_whom(nets, text, agent, action, patient):
    answer = predict_roles(nets["roles"], text)
    assert (answer["agent"], answer["action"], answer["patient"]) == (agent, action, patient)
    assert len(answer["labels"]) == len(answer["tokens"]) == len(text)


def test_without_positions_swapped_sentences_get_the_same_tags(nets):
    a = predict_roles(nets["roles"], "我喜欢你", positions=False)
    b = predict_roles(nets["roles"], "你喜欢我", positions=False)
    assert dict(zip(a["tokens"], a["labels"], strict=True)) == dict(
        zip(b["tokens"], b["labels"], strict=True)
    )


def test_snapshots_load_and_differ_from_the_trained_weights(nets):
    for name, net in nets.items():
        steps = TRAINED[name]["snapshots"]
        first = load_trained(name, step=steps[0])
        assert first.config == net.config
        assert not torch.equal(first.embedding.tok_emb.weight, net.embedding.tok_emb.weight)
    with pytest.raises(ValueError, match="snapshots at steps"):
        load_trained("dates", step=7)
    with pytest.raises(ValueError, match="trained models are"):
        load_trained("chess")


def test_a_trained_tokenizer_is_called_like_hugging_faces(nets):
    tok = nets["roles"].tokenizer
    enc = tok(["我喜欢你", "Tom sees Anna"], padding=True, return_tensors="pt")
    assert enc["input_ids"].shape == enc["attention_mask"].shape == (2, 13)
    assert enc["attention_mask"][0].tolist() == [1] * 4 + [0] * 9
    assert tok.convert_ids_to_tokens(enc["input_ids"][0, :5]) == ["我", "喜", "欢", "你", "[PAD]"]
    assert tok.encode("猫") == [tok.unk_token_id]  # outside this model's alphabet
    assert tok.decode(tok.encode("你喜欢我")) == "你喜欢我"
    assert tok.all_special_tokens == ["[PAD]", "[UNK]", "<s>", "</s>"]
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 2, 3)
