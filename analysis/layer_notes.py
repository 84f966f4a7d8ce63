"""What each step of a layer does, in one English and one Chinese sentence (analysis.layer_steps
gives them to every Step; the page shows them on the step's card).
"""

from __future__ import annotations

from analysis.layer_lines import LLAMA_FILE

# ---- notes ----------------------------------------------------------------------------------
NOTES: dict[str, tuple[str, str]] = {
    "input": (
        "The residual stream entering this layer: one d_model vector per token.",
        "进入这一层的残差流：每个 token 一个 d_model 维向量。",
    ),
    "LayerNorm before self-attention": (
        "Pre-norm: each token's vector is normalised before the masked self-attention reads it.",
        "Pre-norm：掩码自注意力读取之前，先对每个 token 的向量做 LayerNorm。",
    ),
    "self-attention output": (
        "The masked self-attention sublayer (taken apart under the decoder stack), one vector a "
        "token.",
        "掩码自注意力子层的输出（在 decoder 栈里逐步拆开），每个 token 一个向量。",
    ),
    "self-attention residual": (
        "Residual connection: the self-attention output added to the layer's input.",
        "残差连接：把自注意力输出加回这一层的输入。",
    ),
    "LayerNorm after self-attention": (
        "Post-norm: Add & Norm normalises each token's sum (mean 0, variance 1, then γ and β).",
        "Post-norm：Add & Norm 对每个 token 的和做归一化（均值 0、方差 1，再乘 γ 加 β）。",
    ),
    "LayerNorm before attention": (
        "Pre-norm: each token's vector is normalised before the attention reads it; the residual "
        "keeps the un-normalised one.",
        "Pre-norm：注意力读取之前先做 LayerNorm；残差连接保留未归一化的向量。",
    ),
    "RMSNorm before attention": (
        "Pre-norm with RMSNorm (LLaMA): each token's vector is divided by its root mean square "
        "and scaled by g, no mean taken away and no bias; the residual keeps the un-normalised "
        "one.",
        "RMSNorm 形式的 Pre-norm（LLaMA）：每个 token 的向量除以它的均方根再乘以 g，"
        "不减均值、没有偏置；残差连接保留未归一化的向量。",
    ),
    "Q": (
        "Queries: what each token is looking for, one linear map of its vector.",
        "查询 Q：每个 token 要找什么，由它的向量经一次线性变换得到。",
    ),
    "K": (
        "Keys: what each token offers to be found by.",
        "键 K：每个 token 用来被匹配的特征。",
    ),
    "V": (
        "Values: what each token passes on when it is attended to.",
        "值 V：被关注时每个 token 传递出去的内容。",
    ),
    "Q heads": (
        "Q cut into H heads of d_k dimensions each; every head attends on its own.",
        "把 Q 切成 H 个头，每头 d_k 维；每个头独立做注意力。",
    ),
    "K heads": ("K cut into the same H heads.", "K 按同样方式切成 H 个头。"),
    "V heads": ("V cut into the same H heads.", "V 按同样方式切成 H 个头。"),
    "RoPE on Q": (
        "Rotary positions (RoPE): each head's query is turned pair of dimensions by pair, by an "
        "angle its position m times θ_i; nothing was added to the embedding.",
        "旋转位置编码（RoPE）：每个头的查询按维度两两成对旋转，角度为位置 m 乘以 θ_i；"
        "嵌入里没有加位置向量。",
    ),
    "RoPE on K": (
        "The keys turned the same way: the score of query m and key n then depends on m − n "
        "alone, the tokens' offset.",
        "键按同样方式旋转：查询 m 与键 n 的分数于是只取决于两者的距离 m − n。",
    ),
    "K heads repeated": (
        "Grouped-query attention: each key head is shared by a group of query heads, so it is "
        "repeated once for each query head of its group.",
        "分组查询注意力（GQA）：每个键头由一组查询头共用，因此为组里的每个查询头各复制一份。",
    ),
    "V heads repeated": (
        "The value heads repeated the same way: query head h reads value head h // (H / H_kv).",
        "值头按同样方式复制：查询头 h 读取值头 h // (H / H_kv)。",
    ),
    "scores": (
        "Every query against every key, per head, scaled by 1/√d_k so the softmax stays soft.",
        "每个头里每个查询与每个键的点积，再除以 √d_k，避免 softmax 过于尖锐。",
    ),
    "attention weights": (
        "Softmax over the keys: each row sums to 1 and says how much each key is read.",
        "对键做 softmax：每一行和为 1，表示读取每个键的比例。",
    ),
    "context": (
        "Each head's weighted sum of the value vectors: what the token gathers.",
        "每个头按注意力权重对值向量加权求和：这个 token 收集到的信息。",
    ),
    "concat": (
        "The heads' contexts side by side again: back to one d_model vector per token.",
        "把各头的结果重新拼接：回到每个 token 一个 d_model 维向量。",
    ),
    "attention output": (
        "The output projection W_O mixes the heads: the attention sublayer's output.",
        "输出投影 W_O 把各头混合起来：注意力子层的输出。",
    ),
    "attention residual": (
        "Residual connection: the attention output added to the vector it started from.",
        "残差连接：把注意力输出加回它出发时的向量。",
    ),
    "LayerNorm after attention": (
        "Post-norm: Add & Norm normalises each token's sum (mean 0, variance 1, then γ and β).",
        "Post-norm：Add & Norm 对每个 token 的和做归一化（均值 0、方差 1，再乘 γ 加 β）。",
    ),
    "LayerNorm before cross-attention": (
        "Pre-norm: the decoder's vectors are normalised before the cross-attention reads them.",
        "Pre-norm：交叉注意力读取之前，先对 decoder 的向量做 LayerNorm。",
    ),
    "cross-attention output": (
        "Cross-attention (taken apart under the cross stack): Q from the decoder, K and V from "
        "the encoder output C.",
        "交叉注意力的输出（在 cross 栈里逐步拆开）：Q 来自 decoder，K、V 来自 encoder 输出 C。",
    ),
    "cross-attention residual": (
        "Residual connection: the cross-attention output added to the decoder's vectors.",
        "残差连接：把交叉注意力输出加回 decoder 的向量。",
    ),
    "LayerNorm after cross-attention": (
        "Post-norm: Add & Norm after the cross-attention.",
        "Post-norm：交叉注意力之后的 Add & Norm。",
    ),
    "LayerNorm before FFN": (
        "Pre-norm: each token's vector is normalised before the FFN reads it.",
        "Pre-norm：前馈网络读取之前先做 LayerNorm。",
    ),
    "RMSNorm before FFN": (
        "Pre-norm with RMSNorm: each token's vector is normalised by its root mean square before "
        "the MLP reads it.",
        "RMSNorm 形式的 Pre-norm：MLP 读取之前，先用均方根对每个 token 的向量归一化。",
    ),
    "FFN gate": (
        "The gated MLP's gate: one linear map widens each token to d_ff numbers that will decide, "
        "through SiLU, how much of each feature passes.",
        "门控 MLP 的门：一次线性变换把每个 token 扩展到 d_ff 个数，"
        "经过 SiLU 后决定每个特征通过多少。",
    ),
    "FFN up": (
        "The gated MLP's up projection: a second linear map to d_ff features, the ones the gate "
        "scales.",
        "门控 MLP 的上投影：第二个线性变换得到 d_ff 个特征，由门来缩放。",
    ),
    "FFN hidden": (
        "The FFN's first linear layer widens each token to d_ff neurons, then the activation.",
        "前馈网络第一层把每个 token 扩展到 d_ff 个神经元，再经过激活函数。",
    ),
    "FFN output": (
        "The second linear layer maps the d_ff neurons back to d_model: the FFN's output.",
        "第二层把 d_ff 个神经元映射回 d_model：前馈网络的输出。",
    ),
    "FFN residual": (
        "Residual connection: the FFN output added to the vector it read.",
        "残差连接：把前馈网络输出加回它读入的向量。",
    ),
    "LayerNorm after FFN": (
        "Post-norm: the second Add & Norm.",
        "Post-norm：第二个 Add & Norm。",
    ),
    "output": (
        "The layer's output: the residual stream the next layer reads (hidden_states[layer + 1]).",
        "这一层的输出：下一层读取的残差流（hidden_states[layer + 1]）。",
    ),
}
CONVENTION = {  # how the quoted tutorial hides a score, said beside this model's -inf
    "000": (
        " Seed 000 writes -1e9 where mask == 0; this model adds -inf: after the softmax both "
        "are 0.",
        " seed 000 在 mask == 0 处写 -1e9；本模型加 -inf：softmax 之后都是 0。",
    ),
    "003": (
        " Seed 003 writes -1e4 where its mask is True (True = hidden there; here True = may "
        "attend).",
        " seed 003 在 mask 为 True 处写 -1e4（那里 True 表示屏蔽；这里 True 表示可以关注）。",
    ),
    "004": (" Seed 004 writes -inf too.", " seed 004 同样写 -inf。"),
    "llama": (
        " LLaMA's code adds the lowest float32 (about -3.4e38) where hidden; this model adds "
        "-inf: after the softmax both are 0.",
        " LLaMA 的代码在屏蔽处加上 float32 的最小值（约 -3.4e38）；本模型加 -inf：softmax "
        "之后都是 0。",
    ),
}


POSITIONS_OFF = (
    "Positional encoding is switched off for this run: RoPE turns nothing, the heads pass "
    "unchanged.",
    "这次运行关闭了位置编码：RoPE 不旋转，各头原样通过。",
)
GATED_HIDDEN = (
    "The gate through SiLU times the up features, one by one: the d_ff neurons W_down reads.",
    "门经过 SiLU 后与上投影的特征逐个相乘：W_down 读取的 d_ff 个神经元。",
)


def mask_note(
    kind: str, hidden: int, total: int, seed: str, window: int | None = None
) -> tuple[str, str]:
    if kind == "causal" and window is not None:
        en = (
            f"The causal mask with a sliding window of {window} (Mistral): a token sees only "
            f"itself and the {window - 1} tokens before it; {hidden} of the {total} scores per "
            "head (above the diagonal, or too far back) become -inf."
        )
        zh = (
            f"带滑动窗口 {window} 的因果掩码（Mistral）：每个 token 只能看到自己和它之前的 "
            f"{window - 1} 个 token；每个头 {total} 个分数中有 {hidden} 个（对角线以上或太远的）"
            "变为 -inf。"
        )
    elif kind == "causal":
        en = (
            f"The causal mask: a token sees only itself and earlier tokens; {hidden} of the "
            f"{total} scores per head (above the diagonal) become -inf."
        )
        zh = (
            f"因果掩码：每个 token 只能看到自己和之前的 token；每个头 {total} 个分数中"
            f"对角线以上的 {hidden} 个变为 -inf。"
        )
    elif hidden:
        en = f"The padding mask: {hidden} of the {total} scores per head become -inf."
        zh = f"padding 掩码：每个头 {total} 个分数中有 {hidden} 个变为 -inf。"
    else:
        en = (
            "The padding mask hides padded keys (-inf); among this text's real tokens it hides "
            "none, so the scores pass unchanged."
        )
        zh = (
            "padding 掩码屏蔽补齐的键（-inf）；在这段文本的真实 token 之间没有要屏蔽的，"
            "分数原样通过。"
        )
    convention = "llama" if seed.startswith(LLAMA_FILE) else seed.removeprefix("seed ")
    extra = CONVENTION.get(convention, ("", ""))
    return en + extra[0], zh + extra[1]
